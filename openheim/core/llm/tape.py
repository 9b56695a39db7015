"""Record and replay: provider exchanges written to a recording, and served back from one with no network.

``--record`` gives each provider client an ``HttpTransport`` whose recorder appends every finished
exchange to the file (config/recording_file.py describes the format). ``--replay`` and the ``replay``
provider kind give it a ``ReplayTransport`` instead: same interface, no socket, the recorded bytes fed
to the same stream parser, so a replayed run prints exactly what the recorded one did. There is one
tape per file in the process, started afresh by each build and shared by all its clients (subagents
included); two clients built at once on the same file would share it too.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from requests.structures import CaseInsensitiveDict

from openheim.config.recording_file import (
    MARK,
    VERSION,
    Recording,
    body_fields,
    read_recording,
    response_bytes,
)
from openheim.config.secrecy import REDACTED, remove_secrets
from openheim.core.llm.http import HttpTransport, Tap
from openheim.core.llm.http_errors import error_for_status
from openheim.core.turn_context import CancelToken
from openheim.errors import (
    Cancelled,
    ConfigError,
    HttpError,
    ReplayMismatch,
    TransportError,
)

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig

SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie"})
_SECRET_QUERY_WORDS = ("key", "token", "secret", "sig", "auth", "pass")
_tapes: dict[Path, Tape] = {}
_replays: dict[Path, Replay] = {}
_lock = threading.Lock()


def start(record: str | None, replay: list[str]) -> None:
    """A fresh tape for this build: ``record`` truncated now, each of ``replay`` read and rewound."""
    with _lock:
        if record:
            path = _key(record)
            _tapes[path] = Tape(path)
        for name in replay:
            _replays[_key(name)] = Replay(read_recording(name))


def transport_for(cfg: AgentConfig) -> Any:
    """The transport ``cfg`` asks for (None: the client makes its own plain one)."""
    if cfg.replay:
        with _lock:
            replay = _replays.get(_key(cfg.replay))
            if replay is None:
                replay = _replays[_key(cfg.replay)] = Replay(read_recording(cfg.replay))
        replay.check_kind(cfg.kind)
        return ReplayTransport(replay)
    if cfg.record:
        with _lock:
            tape = _tapes.get(_key(cfg.record))
            if tape is None:
                tape = _tapes[_key(cfg.record)] = Tape(_key(cfg.record))
        header = {
            MARK: VERSION,
            "provider": cfg.provider_name,
            "kind": cfg.kind,
            "model": cfg.model,
            "thinking": cfg.thinking,
            "max_tokens": cfg.max_tokens,
        }
        return HttpTransport(
            cfg.timeout_secs,
            api_key=cfg.api_key,
            api_base=cfg.api_base,
            recorder=lambda tap: tape.write(header, exchange(tap)),
        )
    return None


def _key(path: str | Path) -> Path:
    return Path(path).expanduser().absolute()


# --- recording ----------------------------------------------------------------------


class Tape:
    """The file being recorded: truncated when opened, then one flushed line per exchange."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._headed = False
        try:
            self._file = open(path, "wb")  # noqa: SIM115  # open for the whole run, closed at exit
        except OSError as e:
            raise ConfigError(
                f"cannot write recording {path}: {e.strerror or e}; choose another --record path"
            ) from None

    def write(self, header: dict[str, Any], record: dict[str, Any]) -> None:
        with self._lock:
            lines = [] if self._headed else [header]
            self._headed = True
            data = b"".join(_line(v) for v in [*lines, record])
            self._file.write(data)  # one write per exchange; a crash leaves whole lines and at most one torn
            self._file.flush()


def _line(value: dict[str, Any]) -> bytes:
    return remove_secrets(json.dumps(value, ensure_ascii=False)).encode("utf-8") + b"\n"


def exchange(tap: Tap) -> dict[str, Any]:
    """A finished exchange as one recording line: no key in headers or query, the reply's bytes as read."""
    parts = urlsplit(tap.url)
    request: dict[str, Any] = {"method": "POST", "path": parts.path}
    if parts.query:
        request["query"] = urlencode([(k, REDACTED if _secret_param(k) else v) for k, v in parse_qsl(parts.query)])
    request["headers"] = {k: REDACTED if k.lower() in SECRET_HEADERS else v for k, v in tap.headers.items()}
    request["body"] = tap.body
    record: dict[str, Any] = {"request": request}
    if tap.status is not None:
        record["response"] = {"status": tap.status, "headers": tap.response_headers, **body_fields(bytes(tap.data))}
    if tap.error is not None:
        record["error"] = tap.error
    return record


def _secret_param(name: str) -> bool:
    return any(word in name.lower() for word in _SECRET_QUERY_WORDS)


# --- replay -------------------------------------------------------------------------


class Replay:
    """A recording being served: each request takes the first unused exchange that matches it."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self._used = [False] * len(recording.exchanges)
        self._count = 0
        self._lock = threading.Lock()
        self._failed: ReplayMismatch | None = None  # the first mismatch, raised again for every later request

    def check_kind(self, kind: str) -> None:
        recorded = self.recording.header.get("kind")
        if recorded != kind:
            raise ReplayMismatch(
                f"recording {self.recording.path} was made with a {recorded} provider and this "
                f"run uses {kind}; pick that provider or record again with --record"
            )

    def take(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        """The recorded exchange for this request, or ReplayMismatch naming the first difference."""
        live = comparable(json.loads(remove_secrets(json.dumps(body, ensure_ascii=False))))
        endpoint = _endpoint(urlsplit(url).path)
        with self._lock:
            if self._failed is not None:  # e.g. a subagent's mismatch became a tool error the model saw
                raise ReplayMismatch(self._failed.message)
            self._count += 1
            first = None
            for i, ex in enumerate(self.recording.exchanges):
                if self._used[i]:
                    continue
                first = ex if first is None else first
                request = ex["request"]
                if comparable(request["body"]) == live and _endpoint(str(request.get("path", ""))) == endpoint:
                    self._used[i] = True  # concurrent subagents may ask in another order than recorded
                    return ex
            n, held = self._count, len(self.recording.exchanges)
            self._failed = self._mismatch(n, held, first, live, endpoint)
            raise self._failed

    def _mismatch(self, n: int, held: int, first: dict[str, Any] | None, live: Any, endpoint: str) -> ReplayMismatch:
        path = self.recording.path
        again = f"record it again with openheim run --record {path}"
        if first is None:
            cut = "; its last line is incomplete: the recorded run was cut off" if self.recording.truncated else ""
            held_text = f"{held} exchange" + ("" if held == 1 else "s")
            return ReplayMismatch(f"request {n} is not in recording {path} (it holds {held_text}{cut}); {again}")
        recorded_path = str(first["request"].get("path", ""))
        if _endpoint(recorded_path) != endpoint:
            diff = f"URL path: recorded …/{_endpoint(recorded_path)}, this run …/{endpoint}"
        else:
            diff = first_difference(comparable(first["request"]["body"]), live) or "the request body"
        return ReplayMismatch(f"request {n} differs from recording {path}: {diff}; {again}")


# Request fields that name the session rather than what is asked (a replay runs in a session of its own).
PER_SESSION = ("prompt_cache_key",)


def comparable(body: Any) -> Any:
    """A request body as a replay compares it: without the fields that differ from session to session."""
    if not isinstance(body, dict):
        return body
    return {k: v for k, v in body.items() if k not in PER_SESSION}


def _endpoint(path: str) -> str:
    """The part of a URL path a replay compares (the last segment; it names the model on Gemini)."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def first_difference(recorded: Any, live: Any, where: str = "") -> str | None:
    """A short path to the first place two JSON values differ, with both values, or None when equal."""
    if isinstance(recorded, dict) and isinstance(live, dict):
        for key in [*recorded, *(k for k in live if k not in recorded)]:
            here = f"{where}.{key}" if where else str(key)
            if key not in live:
                return f"{here}: recorded {_short(recorded[key])}, this run has none"
            if key not in recorded:
                return f"{here}: not recorded, this run {_short(live[key])}"
            found = first_difference(recorded[key], live[key], here)
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(live, list):
        for i, (a, b) in enumerate(zip(recorded, live)):
            found = first_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        if len(recorded) != len(live):
            return f"{where or 'body'}: recorded {len(recorded)} items, this run {len(live)}"
        return None
    if recorded == live and type(recorded) is type(live):
        return None
    return f"{where or 'body'}: recorded {_short(recorded)}, this run {_short(live)}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"


class ReplayedResponse:
    """A recorded 2xx reply: what ``read_reply`` and ``post_json`` read from a live one."""

    def __init__(self, status: int, headers: Mapping[str, str], data: bytes, error: str | None) -> None:
        self.status_code = status
        self.headers: CaseInsensitiveDict[str] = CaseInsensitiveDict(headers)
        self._data, self._error = data, error

    def replayed_chunks(self) -> Iterator[bytes]:
        if self._data:
            yield self._data
        if self._error is not None:  # the recorded connection dropped mid-reply
            raise TransportError(self._error)


class ReplayTransport:
    """``HttpTransport``'s interface over a recording: opens no socket."""

    def __init__(self, replay: Replay) -> None:
        self.replay = replay
        self.timeout = 0.0

    @contextmanager
    def stream(
        self, url: str, body: dict[str, Any], headers: dict[str, str], cancel: CancelToken, *, overflow: bool = True
    ) -> Iterator[ReplayedResponse]:
        if cancel.cancelled:
            raise Cancelled()
        ex = self.replay.take(url, body)
        response, error = ex.get("response"), ex.get("error")
        if not isinstance(response, dict):
            raise TransportError(str(error or "the recorded request got no response"))
        status = int(response.get("status", 200))
        data, headers_ = response_bytes(response), response.get("headers") or {}
        if 300 <= status < 400:
            raise HttpError(
                status, f"redirect to {headers_.get('location', '?')} refused; set api_base to the final URL"
            )
        if not 200 <= status < 300:
            raise error_for_status(status, data.decode("utf-8", "replace"), headers_, overflow=overflow)
        yield ReplayedResponse(status, headers_, data, error)

    def post_json(
        self, url: str, body: dict[str, Any], headers: dict[str, str], cancel: CancelToken | None = None, limit: int = 0
    ) -> Any:
        with self.stream(url, body, headers, cancel or CancelToken(), overflow=False) as resp:
            return json.loads(b"".join(resp.replayed_chunks()).decode("utf-8", "replace"))

    def close(self) -> None:
        pass
