"""The one HTTP policy of openheim: every request to a model or embeddings provider goes through here.

One checked, cancellable response per request; no ``~/.netrc``, no URL user info sent, no redirects
followed (so no header can follow one), one User-Agent, and no secret in any message it makes.
With a recorder (``--record``), each finished exchange, its reply bytes as read, goes to core/llm/tape.py.
Only provider modules import this, so importing ``requests`` at module level is fine here.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import requests
import urllib3
from urllib3.util.request import ACCEPT_ENCODING

from openheim.config.secrecy import host_of, redact, remember_secrets, url_secrets
from openheim.core.turn_context import CancelToken
from openheim.errors import (
    ApiError,
    Cancelled,
    ConfigError,
    ContextOverflow,
    HttpError,
    OpenheimError,
    TransportError,
)

USER_AGENT = "openheim"
OVERFLOW_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "reduce the length of the messages",
    "prompt is too long",
    "exceeds the maximum number of tokens",
    "exceeds the available context size",
    "exceeds the context window",
    "exceed context limit",
    "input token count",
    "exceed_context_size_error",
)
_ERROR_BODY_LIMIT = 1 << 20
_READ_SIZE = 65536
JSON_BODY_LIMIT = 64 << 20  # a whole JSON reply (embeddings: 100 vectors of 3072 numbers is ~6 MB)
HEAD_BYTES = 120  # how much of an unreadable reply a message quotes
_DECODABLE = frozenset(e.strip() for e in ACCEPT_ENCODING.split(",")) | {"identity", ""}
_TRANSPORT_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


def is_overflow(status: int, body: str) -> bool:
    """Whether an error reply means the prompt did not fit the model's context window."""
    if status == 413:
        return True
    low = body.lower()
    if "exceed_context_size_error" in low:  # llama.cpp: trust the body, its status has varied
        return True
    return status == 400 and any(p in low for p in OVERFLOW_PHRASES)


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, ``retry-after`` (seconds) or ``retry-after`` (HTTP date)."""
    ms = _header(headers, "retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(when - (time.time() if now is None else now), 0.0)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value.strip()
    return None


def error_for_status(status: int, body: str, headers: Mapping[str, str], *, overflow: bool = True) -> OpenheimError:
    """The exception for a non-2xx reply: ContextOverflow (when ``overflow`` applies) or an HttpError whose
    message is the provider's own, taken from its error body."""
    if overflow and is_overflow(status, body):
        return ContextOverflow(redact(provider_message(body, status)))
    return HttpError(status, body, parse_retry_after(headers), message=redact(provider_message(body, status)))


def provider_message(body: str, status: int = 0) -> str:
    """The provider's own words in an error body: OpenAI/compatible, Anthropic, Gemini, flat and proxy shapes."""
    text = body.strip()
    if not text:
        return f"{http.client.responses.get(status, 'error')} (empty body)"
    try:
        found = _json_message(json.loads(text))
    except (ValueError, RecursionError):
        found = None
    if found:
        return " ".join(found.split())
    if text[:1] == "<":
        title = re.search(r"<title[^>]*>(.*?)</title>", text[:65536], re.IGNORECASE | re.DOTALL)
        name = " ".join(title.group(1).split()) if title else ""
        return f"an HTML page{': ' + name[:200] if name else ''} instead of an API error"
    flat = " ".join(text.split())
    return flat if len(flat) <= 300 else flat[:299] + "…"


def _json_message(value: Any) -> str | None:
    if isinstance(value, list) and value:
        value = value[0]  # Gemini without alt=sse answers a list
    if not isinstance(value, dict):
        return None
    err = value.get("error", value)
    if isinstance(err, str):
        return err
    if not isinstance(err, dict):
        return None
    message = err.get("message")
    if not isinstance(message, str) or not message.strip():
        message = value.get("message") if isinstance(value.get("message"), str) else value.get("detail")
    if not isinstance(message, str) or not message.strip():
        return None
    kind = err.get("type") or err.get("status") or err.get("code")
    if isinstance(kind, str) and kind not in ("None", "null", "error") and kind.lower() not in message.lower():
        return f"{message} ({kind})"
    return message


def unreadable_reply(url: str, content_type: str, head: bytes, why: str) -> ApiError:
    """The error for a 2xx reply that cannot be parsed: never retried, names the content type and first bytes."""
    shown = " ".join(head[:HEAD_BYTES].decode("utf-8", "replace").split())
    return ApiError(
        f"{host_of(url)} sent a reply openheim cannot read ({why}; content type "
        f"{content_type or 'none'}; it begins {redact(shown)!r}); check api_base and that the server "
        "speaks this provider's API",
        retryable=False,
    )


def read_body(chunks: Iterator[bytes], limit: int, url: str) -> bytes:
    """All of ``chunks``, failing (not retried) once they pass ``limit`` bytes."""
    data = bytearray()
    for chunk in chunks:
        data += chunk
        if len(data) > limit:
            raise ApiError(
                f"{host_of(url)} sent a reply larger than {limit >> 20} MiB; openheim does not read replies that big",
                retryable=False,
            )
    return bytes(data)


def read_chunks(resp: requests.Response) -> Iterator[bytes]:
    """The body's bytes as they arrive, in as few pieces as the network allows (a replayed reply's
    recorded bytes; a recorded reply's bytes are also kept for its recording)."""
    replayed = getattr(resp, "replayed_chunks", None)
    if replayed is not None:
        return replayed()
    chunks = network_chunks(resp)
    tap: Tap | None = getattr(resp, "openheim_tap", None)
    return tap.keep(chunks) if tap is not None else chunks


def network_chunks(resp: requests.Response) -> Iterator[bytes]:
    """The decoded body as it arrives: each HTTP chunk of a chunked reply, else whatever one read returns
    (``read1``), so a stream is handed on in real time whatever its framing."""
    if resp.raw.chunked and resp.raw.supports_chunked_reads():
        return resp.iter_content(chunk_size=None)
    return _read1_chunks(resp)


def _read1_chunks(resp: requests.Response) -> Iterator[bytes]:
    read1 = resp.raw.read1
    while True:
        data = read1(_READ_SIZE, decode_content=True)
        if not data:
            return
        yield data


class Tap:
    """One exchange as ``--record`` keeps it: the request, and the response as it is read."""

    KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms", "location")

    def __init__(self, url: str, headers: Mapping[str, str], body: dict[str, Any]) -> None:
        self.url, self.headers, self.body = url, headers, body
        self.status: int | None = None
        self.response_headers: dict[str, str] = {}
        self.data = bytearray()
        self.error: str | None = None

    def respond(self, resp: requests.Response) -> None:
        self.status = resp.status_code
        self.response_headers = {k: resp.headers[k] for k in self.KEPT_HEADERS if k in resp.headers}

    def keep(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            self.data += chunk
            yield chunk


Recorder = Callable[[Tap], None]  # writes a finished exchange to a recording (core/llm/tape.py)


def _read_error_body(resp: requests.Response) -> str:
    try:
        data = bytearray()
        for chunk in network_chunks(resp):
            data += chunk
            if len(data) >= _ERROR_BODY_LIMIT:
                break
        return data.decode("utf-8", errors="replace")
    except Exception:
        return "<failed to read error body>"


def _shutdown(resp: requests.Response) -> None:
    """Unblock a reader stuck in ``recv`` on ``resp``'s socket (a cancel action)."""
    connection = resp.raw.connection  # None once urllib3 has released it
    sock = getattr(connection, "sock", None)
    try:
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        else:
            resp.close()
    except (OSError, AttributeError, ValueError):
        pass


def _decodable(resp: requests.Response) -> bool:
    encodings = resp.headers.get("content-encoding", "").lower().split(",")
    return all(e.strip() in _DECODABLE for e in encodings)


def _check_readable(resp: requests.Response, url: str) -> None:
    """Refuse, before reading on, a 2xx reply that is an HTML page or compressed in a way we cannot decode."""
    content_type = resp.headers.get("content-type", "")
    if not _decodable(resp):
        encoding = resp.headers.get("content-encoding", "")
        raise ApiError(
            f"{host_of(url)} sent a reply compressed with {encoding!r}, which openheim cannot decode "
            "(it asks for uncompressed replies); check api_base and any proxy in between",
            retryable=False,
        )
    if content_type.lower().startswith("text/html"):
        head = next(network_chunks(resp), b"")
        raise unreadable_reply(url, content_type, head, "an HTML page, not an API reply")


def describe_transport_error(exc: BaseException, url: str, timeout: float) -> str:
    """A one-line account of a failed connection or read."""
    host = host_of(url)
    text = redact(str(exc))
    if isinstance(exc, requests.ConnectTimeout):
        return f"timed out connecting to {host} after {timeout:g} s; check api_base and the network"
    if isinstance(exc, (requests.ReadTimeout, urllib3.exceptions.ReadTimeoutError)) or "timed out" in text:
        return f"no data from {host} for {timeout:g} s (timeout_secs); the provider stopped responding"
    if "NameResolution" in text or "Name or service not known" in text or "getaddrinfo" in text:
        return f"could not resolve {host}; check api_base and the network"
    if "NewConnectionError" in text or "refused" in text:
        return f"could not connect to {host}: connection refused; check api_base and that the server is up"
    if isinstance(
        exc, (requests.exceptions.ChunkedEncodingError, urllib3.exceptions.ProtocolError, http.client.IncompleteRead)
    ):
        return f"the connection to {host} closed mid-response ({_short(text)}); try again"
    return f"{type(exc).__name__} talking to {host}: {_short(text)}"


def _request_error(exc: BaseException, url: str, timeout: float) -> OpenheimError:
    """The error for a POST that got no response; never echoes header values (they hold the key)."""
    if isinstance(
        exc, (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema, requests.exceptions.InvalidSchema)
    ):
        return ConfigError(f"api_base gives an invalid URL ({_short(redact(str(exc)))}); fix api_base in the config")
    if isinstance(exc, (requests.exceptions.InvalidHeader, ValueError)):
        return ConfigError("a request header is invalid; check the API key for stray spaces or line breaks")
    return transport_error(exc, url, timeout)


def transport_error(exc: BaseException, url: str, timeout: float) -> TransportError:
    """A failed connection or read as a TransportError; a host name that does not resolve is not retried."""
    text = describe_transport_error(exc, url, timeout)
    return TransportError(text, retryable=not text.startswith("could not resolve "))


def _no_netrc(request: requests.PreparedRequest) -> requests.PreparedRequest:
    """Set as a session's auth, so requests neither reads ``~/.netrc`` nor sends a URL's user info."""
    return request


def _short(text: str) -> str:
    return text if len(text) <= 300 else text[:300] + "..."


class _Pending:
    """A POST running in a helper thread, so that waiting for the response head can be cancelled."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.resp: requests.Response | None = None
        self.error: BaseException | None = None
        self.abandoned = False


class _HelperThreads:
    """Reusable daemon threads for blocking calls the caller must be able to walk away from.

    Starting a thread per request costs more than the request itself on loopback; idle helpers wait
    for the next job instead. A job the caller abandoned (cancel) keeps its helper until it returns.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        self._jobs.put(job)
        if spawn:
            threading.Thread(target=self._serve, name="openheim-http", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self._jobs.get()()
            with self._lock:
                self._idle += 1


_HELPERS = _HelperThreads()


class HttpTransport:
    """POSTs JSON and hands back a checked streaming response; safe to share between threads.

    ``api_key`` and the secret parts of ``api_base`` (user info, query values) are removed from every
    message and log line from then on.
    """

    def __init__(
        self, timeout_secs: float, *, api_key: str = "", api_base: str = "", recorder: Recorder | None = None
    ) -> None:
        self.timeout = float(timeout_secs) if timeout_secs and timeout_secs > 0 else 120.0
        self.recorder = recorder
        self._lock = threading.Lock()
        self._idle: list[requests.Session] = []
        remember_secrets(api_key, *url_secrets(api_base))

    def _acquire(self) -> requests.Session:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        session = requests.Session()
        session.auth = _no_netrc  # ~/.netrc must never replace or add credentials
        session.headers["User-Agent"] = USER_AGENT
        return session

    def _release(self, session: requests.Session) -> None:
        with self._lock:
            if len(self._idle) < 4:
                self._idle.append(session)
                return
        session.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for s in idle:
            s.close()

    @contextmanager
    def stream(
        self, url: str, body: dict[str, Any], headers: dict[str, str], cancel: CancelToken, *, overflow: bool = True
    ) -> Iterator[requests.Response]:
        """POST ``body``; yield the 2xx response; map failures to openheim errors; close at exit.

        ``overflow``: whether an error reply may mean "context window exceeded" (model requests only).
        """
        if cancel.cancelled:
            raise Cancelled()
        tap = Tap(url, headers, body) if self.recorder is not None else None
        try:
            with self._stream(url, body, headers, cancel, overflow, tap) as resp:
                yield resp
        except TransportError as exc:
            if tap is not None:
                tap.error = exc.message
            raise
        finally:
            if tap is not None and self.recorder is not None and not cancel.cancelled:
                self.recorder(tap)

    @contextmanager
    def _stream(
        self,
        url: str,
        body: dict[str, Any],
        headers: dict[str, str],
        cancel: CancelToken,
        overflow: bool,
        tap: Tap | None,
    ) -> Iterator[requests.Response]:
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        resp, session = self._open(url, data, headers, cancel)
        remove = cancel.on_cancel(lambda: _shutdown(resp))
        resp.openheim_idle_secs = self.timeout  # type: ignore[attr-defined]  # sse.EventFrames: comments are no content
        if tap is not None:
            tap.respond(resp)
            resp.openheim_tap = tap  # type: ignore[attr-defined]  # read_chunks keeps what it reads
        try:
            if not 200 <= resp.status_code < 300:
                raise self._status_error(resp, overflow, tap)
            _check_readable(resp, url)
            yield resp
        except Exception as exc:
            if cancel.cancelled:
                raise Cancelled() from None
            if isinstance(exc, _TRANSPORT_ERRORS) and not isinstance(exc, OpenheimError):
                raise transport_error(exc, url, self.timeout) from None
            raise
        finally:
            remove()
            resp.close()
            self._release(session)

    def post_json(
        self,
        url: str,
        body: dict[str, Any],
        headers: dict[str, str],
        cancel: CancelToken | None = None,
        limit: int = JSON_BODY_LIMIT,
    ) -> Any:
        """POST ``body`` and return the decoded JSON reply (an unreadable one is an ApiError, never retried)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
        with self.stream(url, body, headers, cancel or CancelToken(), overflow=False) as resp:
            data = read_body(read_chunks(resp), limit, url)
            content_type = resp.headers.get("content-type", "")
        try:
            return json.loads(data.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            raise unreadable_reply(url, content_type, data, "not JSON") from None

    def _status_error(self, resp: requests.Response, overflow: bool, tap: Tap | None = None) -> OpenheimError:
        if 300 <= resp.status_code < 400:
            where = redact(resp.headers.get("location", "?"))
            return HttpError(resp.status_code, f"redirect to {where} refused; set api_base to the final URL")
        if not _decodable(resp):
            encoding = resp.headers.get("content-encoding", "")
            return HttpError(
                resp.status_code,
                "",
                parse_retry_after(resp.headers),
                message=f"{http.client.responses.get(resp.status_code, 'error')} (a body compressed "
                f"with {encoding!r}, which openheim cannot decode)",
            )
        body = _read_error_body(resp)
        if tap is not None:
            tap.data += body.encode("utf-8")
        return error_for_status(resp.status_code, body, resp.headers, overflow=overflow)

    def _open(
        self, url: str, data: bytes, headers: dict[str, str], cancel: CancelToken
    ) -> tuple[requests.Response, requests.Session]:
        session = self._acquire()
        pending = _Pending()
        _HELPERS.submit(lambda: self._post(session, url, data, headers, pending))
        remove = cancel.on_cancel(pending.done.set)
        pending.done.wait()
        remove()
        with pending.lock:
            if pending.resp is None and pending.error is None:  # cancelled while waiting
                pending.abandoned = True
                raise Cancelled()
        if pending.error is not None:
            self._release(session)
            if cancel.cancelled:
                raise Cancelled()
            raise _request_error(pending.error, url, self.timeout) from None
        assert pending.resp is not None
        return pending.resp, session

    def _post(
        self, session: requests.Session, url: str, data: bytes, headers: dict[str, str], pending: _Pending
    ) -> None:
        resp = error = None
        try:
            resp = session.post(
                url,
                data=data,
                headers=headers,
                stream=True,
                allow_redirects=False,
                timeout=(self.timeout, self.timeout),
            )
        except BaseException as exc:  # handed to the waiting thread
            error = exc
        with pending.lock:
            pending.resp, pending.error = resp, error
            abandoned = pending.abandoned
        pending.done.set()
        if abandoned:
            if resp is not None:
                resp.close()
            self._release(session)
