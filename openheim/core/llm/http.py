"""The one HTTP policy of openheim: every request to a model or embeddings provider goes through here.

One checked, cancellable response per request; no ``~/.netrc``, no URL user info sent, no redirects
followed (so no header can follow one), one User-Agent, and no secret in any message it makes.
With a recorder (``--record``), each finished exchange, its reply bytes as read, goes to core/llm/tape.py.
Only provider modules import this, so importing ``requests`` at module level is fine here.
"""

from __future__ import annotations

import http.client
import json
import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import requests
import urllib3
from urllib3.util.request import ACCEPT_ENCODING

from openheim.config.secrecy import host_of, redact, remember_secrets, url_secrets
from openheim.core.cancel import CancelToken
from openheim.core.llm.http_errors import (
    error_for_status,
    malformed_chunks,
    parse_retry_after,
    request_error,
    transport_error,
    unreadable_reply,
)
from openheim.errors import (
    ApiError,
    Cancelled,
    HttpError,
    OpenheimError,
    TransportError,
)

USER_AGENT = "openheim"
_ERROR_BODY_LIMIT = 1 << 20
_READ_SIZE = 65536
JSON_BODY_LIMIT = 64 << 20  # a whole JSON reply (embeddings: 100 vectors of 3072 numbers is ~6 MB)
_DECODABLE = frozenset(e.strip() for e in ACCEPT_ENCODING.split(",")) | {"identity", ""}
_TRANSPORT_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


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
    """The decoded body as it arrives: each HTTP chunk of a chunked reply (a big one in pieces), else whatever
    one read returns (``read1``), so a stream is handed on in real time whatever its framing."""
    if resp.raw.chunked and resp.raw.supports_chunked_reads():
        return _http_chunks(resp)
    return _read1_chunks(resp)


def _http_chunks(resp: requests.Response) -> Iterator[bytes]:
    """A chunked body, read at most ``_READ_SIZE`` bytes at a time (a chunk size of ``FFFFFFFFFF`` is never
    allocated whole); a negative chunk size (urllib3's read then raises ValueError) is a provider error."""
    pieces = resp.iter_content(chunk_size=_READ_SIZE)
    while True:
        try:
            piece = next(pieces)
        except StopIteration:
            return
        except ValueError:
            raise TransportError(malformed_chunks(resp.url or ""), retryable=False) from None
        yield piece


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
    """Unblock a reader stuck in ``recv`` on ``resp``'s socket (a cancel action, from another thread).

    urllib3's ``HTTPResponse.shutdown`` holds the socket from when the head arrived: for a reply that ends
    when the server closes (no length, not chunked) the connection itself has forgotten it by then."""
    resp.openheim_cut = True  # type: ignore[attr-defined]  # what the reader meets next is our doing
    try:
        resp.raw.shutdown()
    except (OSError, ValueError, RuntimeError, AttributeError):  # released, or not a network response
        pass


def cut_by_us(resp: object) -> bool:
    """Whether a cancel shut ``resp``'s body down: a payload it cut short is not the provider's fault."""
    return getattr(resp, "openheim_cut", False)


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


def _no_netrc(request: requests.PreparedRequest) -> requests.PreparedRequest:
    """Set as a session's auth, so requests neither reads ``~/.netrc`` nor sends a URL's user info."""
    return request


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
            raise request_error(pending.error, url, self.timeout) from None
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
