"""`openheim serve`: ACP over WebSocket (`/acp`, and `/ws` with an fs channel), a REST API and a web page.

One threading WebSocket server (the ``websockets`` package, imported only here) answers plain HTTP
requests in ``process_request`` and hands upgraded sockets to the same ACP server as `openheim acp`;
only the framing differs (one JSON-RPC message per text frame). Each socket has a bounded writer: a
client that stops reading is disconnected instead of being buffered without limit.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from openheim.acp.connection import Sink, Writer
from openheim.acp.server import AcpServer, Parsed
from openheim.config.loopback import is_loopback
from openheim.config.secrecy import remember_secrets
from openheim.errors import ConfigError, OpenheimError
from openheim.serve import guard, rest
from openheim.serve.fs_channel import MAX_FILE_BYTES, FsChannel
from openheim.serve.ownership import MAX_SESSIONS_PER_CLIENT, ConnectionClient, Owners, Scope
from openheim.serve.replies import PAGE_POLICY, BadRequest, error, json_response, library_logger, page, response, single
from openheim.serve.watch import WatchHub

if TYPE_CHECKING:
    from websockets.http11 import Request, Response
    from websockets.sync.server import Server, ServerConnection

    from openheim.client import OpenheimClient
    from openheim.config.schema import ServeConfig

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 1217
MAX_PENDING = 8 * 1024 * 1024  # bytes a socket may have waiting to be sent before it is dropped
MAX_SOCKETS = 1024
SHUTDOWN_GRACE = 2.0  # seconds cancelled turns get to answer before sockets are closed
CLOSE_TIMEOUT = 2.0
MAX_MESSAGE_BYTES = 8 * 1024 * 1024  # an ACP frame larger than this is refused before it is parsed
ENVELOPE_SLACK = 64 * 1024  # what an fs write's frame may carry besides the file's content
MIN_READ_RATE = 64 * 1024  # bytes per second a REST client must at least read for its reply to be completed
AGENT_PREFIX = b'{"channel":"agent","data":'
FS_ENVELOPE = re.compile(r'\s*\{\s*"channel"\s*:\s*"fs"\s*,')
_END = object()


@dataclass
class ServeOptions:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None  # None only with --no-token, on loopback
    cors_origins: tuple[str, ...] = ()
    max_pending: int = MAX_PENDING
    max_sockets: int = MAX_SOCKETS
    watch_interval: float = 1.0  # seconds between polls of a watched tree
    allow_client_mcp_commands: bool = False  # may a client's session/new start stdio MCP servers?
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_file_bytes: int = MAX_FILE_BYTES
    token_generated: bool = False  # no token was configured: this one was made up at start
    max_sessions_per_client: int = MAX_SESSIONS_PER_CLIENT  # live sessions one connection may hold

    @property
    def max_frame_bytes(self) -> int:
        """The largest frame read at all: an ACP message, or an fs write with its envelope."""
        return max(self.max_message_bytes, self.max_file_bytes + ENVELOPE_SLACK)


def resolve_options(
    config: ServeConfig,
    host: str | None,
    port: int | None,
    token: str | None,
    environ: dict | None = None,
    no_token: bool = False,
) -> ServeOptions:
    """Flags over ``[serve]`` over defaults. A network address needs a token; on loopback, without one, one
    is generated (``token_generated``), unless ``no_token`` asks to serve without."""
    env = os.environ if environ is None else environ
    host = host or config.host or DEFAULT_HOST
    port = config.port if port is None else port
    token = token if token is not None else env.get(config.token_env)
    if token is not None and not token.strip():
        raise ConfigError(f"the serve token is empty; set {config.token_env} (or --token) to a long random string")
    if no_token and token is not None:
        raise ConfigError(f"--no-token contradicts the token given (by --token or {config.token_env}); drop one")
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"binding {host} makes the agent reachable from the network, so it needs a token: "
            f"set {config.token_env} (or pass --token) to a long random string"
        )
    generated = token is None and not no_token
    if generated:
        token = secrets.token_urlsafe(32)
    return ServeOptions(
        host,
        DEFAULT_PORT if port is None else port,
        token,
        tuple(config.cors_origins),
        allow_client_mcp_commands=config.allow_client_mcp_commands,
        max_message_bytes=config.max_message_bytes,
        max_file_bytes=config.max_file_bytes,
        token_generated=generated,
    )


# --- sockets ----------------------------------------------------------------------------


def frames(ws: ServerConnection, limit: int | None = None) -> Iterator[str | bytes | None]:
    """A socket's incoming messages until it closes (however it closes); None stands for one longer than
    ``limit``, which is never parsed."""
    from websockets.exceptions import ConnectionClosed

    try:
        for frame in ws:
            yield None if limit is not None and len(frame) > limit else frame
    except ConnectionClosed:
        return


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def parse_envelope(frame: str | bytes) -> tuple[Any, str | None]:
    """(the parsed frame, None), or (None, why it is not JSON): strict JSON, so no NaN or infinity gets in."""
    try:
        return json.loads(frame, parse_constant=_refuse_constant, parse_float=_finite), None
    except (ValueError, UnicodeDecodeError) as e:
        return None, f"Invalid message: not JSON ({e})"
    except RecursionError:
        return None, "Invalid message: nested too deeply"


def frame_sink(ws: ServerConnection) -> Sink:
    """One text frame per message (the line's newline dropped)."""
    from websockets.exceptions import ConnectionClosed

    def send(lines: list[bytes]) -> None:
        try:
            for line in lines:
                ws.send(line[:-1], text=True)
        except ConnectionClosed as e:
            raise OSError(f"the socket is closed ({e})") from None

    return send


class Peer:
    """One WebSocket: its bounded writer and the ACP server speaking on it."""

    def __init__(self, ws: ServerConnection, max_pending: int, client: ConnectionClient) -> None:
        self.ws = ws
        self.client = client  # this connection's door to the runtime: it owns the sessions it opens
        self.out = Writer(frame_sink(ws), max_pending, on_overflow=self.abort)
        self.acp: AcpServer | None = None
        self.agent_writer: Writer | None = None  # /ws: the ACP server's own writer, feeding ``out``

    def abort(self) -> None:
        """Drop a client that stopped reading: no close frame can reach it, so cut the connection."""
        try:
            self.ws.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def flush(self, timeout: float) -> None:
        """Send what is queued (used before closing the socket on shutdown)."""
        for writer in (self.agent_writer, self.out):
            if writer is not None:
                writer.close(timeout)


class OpenheimServer:
    """The HTTP + WebSocket server; ``start()`` binds and serves on a background thread."""

    def __init__(self, client: OpenheimClient, options: ServeOptions) -> None:
        self.client, self.options = client, options
        if options.token:
            remember_secrets(options.token)  # never in a log line
        self.root = Path(client.work_dir or os.getcwd())
        # work_dir unset in the config: `openheim serve` serves the directory it was started in
        self.scope = Scope(self.root, configured=client.config.work_dir is not None)
        self.owners = Owners(options.max_sessions_per_client)  # which connection holds each live session
        self.reader = ConnectionClient(client, self.owners, self.scope)  # the REST API's view: it never opens
        self.watches = WatchHub(options.watch_interval)  # one poller per watched tree, for every socket
        self.peers: set[Peer] = set()
        self._lock = threading.Lock()
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self.port = options.port

    @property
    def url(self) -> str:
        host = self.options.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/"

    def start(self) -> OpenheimServer:
        from websockets.sync.server import serve

        try:
            self._server = serve(
                self._handle,
                self.options.host,
                self.options.port,
                process_request=self._process_request,
                compression=None,
                max_size=self.options.max_frame_bytes,
                close_timeout=CLOSE_TIMEOUT,
                server_header=None,
                logger=library_logger(),
            )
        except OSError as e:
            raise OpenheimError(
                f"Failed to bind {self.options.host}:{self.options.port}: {e.strerror or e} "
                "(is another server using the port? choose one with --port)"
            ) from None
        server = self._server
        self.port = server.socket.getsockname()[1]
        self._thread = threading.Thread(target=server.serve_forever, name="serve-accept", daemon=True)
        self._thread.start()
        return self

    # --- plain HTTP and the upgrade check ------------------------------------------------

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        """Plain HTTP requests are answered here; a WebSocket upgrade that passes the checks returns None."""
        try:
            answer = self._answer(request)
        except BadRequest as e:
            return error(400, str(e))
        except Exception:
            log.exception("%s %s failed", request.method, urlsplit(request.path).path)
            return error(500, "internal error; see the server log")
        if answer is not None and len(answer.body) > MIN_READ_RATE * CLOSE_TIMEOUT:
            # websockets gives a reply close_timeout seconds to leave: long enough for a slow reader
            connection.close_timeout = max(CLOSE_TIMEOUT, len(answer.body) / MIN_READ_RATE)
        return answer

    def _answer(self, request: Request) -> Response | None:
        url = urlsplit(request.path)
        path, method = url.path, request.method
        headers = {name: single(request.headers, name) for name in ("Host", "Origin", "Authorization", "Upgrade")}
        cors = guard.cors_headers(headers["Origin"], self.options.cors_origins)
        upgrade = "websocket" in (headers["Upgrade"] or "").lower()
        refused = self._refusal(method, path, url.query, headers, upgrade, cors)
        if refused is not None:
            return refused
        if upgrade:
            return self._upgrade(path, headers["Origin"], headers["Host"])
        head = method == "HEAD"
        if path in ("/acp", "/ws"):
            return error(
                426,
                f"{path} is a WebSocket endpoint; connect with a WebSocket client",
                [("Upgrade", "websocket"), *cors],
            )
        if path in ("/", "/index.html"):
            return response(
                200,
                page(),
                "text/html; charset=utf-8",
                [("Content-Security-Policy", PAGE_POLICY), ("Referrer-Policy", "no-referrer")],
                head,
            )
        if rest.is_api(path):
            status, payload = rest.handle(self.reader, path)
            return json_response(status, payload, cors, head)
        return error(404, f"no such page: {path}", cors)

    def _refusal(
        self, method: str, path: str, query: str, headers: dict, upgrade: bool, cors: list[tuple[str, str]]
    ) -> Response | None:
        """The answer to a request that goes no further (a foreign Host, a preflight, a method, the token)."""
        if self.options.token is None and not guard.host_ok(headers["Host"]):
            return error(403, "this server answers only to a loopback Host (localhost, 127.0.0.1, [::1])", cors)
        if method == "OPTIONS":
            origin = headers["Origin"]
            return response(204, b"", "text/plain", guard.preflight_headers(origin, self.options.cors_origins))
        if method not in ("GET", "HEAD"):
            return error(
                405, f"{method} is not supported; the API is read-only", [("Allow", "GET, HEAD, OPTIONS"), *cors]
            )
        if not (path == "/" and not upgrade) and not guard.token_ok(self.options.token, headers, query):
            return error(
                401,
                "missing or wrong token: send 'Authorization: Bearer TOKEN' or add ?token=TOKEN",
                [("WWW-Authenticate", "Bearer"), *cors],
            )
        return None

    def _upgrade(self, path: str, origin: str | None, host: str | None) -> Response | None:
        if path not in ("/acp", "/ws"):
            return error(404, f"no WebSocket endpoint at {path}; use /acp or /ws")
        if not guard.origin_allowed(origin, host, self.options.cors_origins):
            return error(403, f"origin {origin} may not connect; add it to [serve] cors_origins")
        with self._lock:
            if len(self.peers) >= self.options.max_sockets:
                return error(503, f"too many connections ({self.options.max_sockets}); try again later")
        return None

    # --- WebSocket connections ---------------------------------------------------------

    def _handle(self, ws: ServerConnection) -> None:
        peer = Peer(ws, self.options.max_pending, ConnectionClient(self.client, self.owners, self.scope))
        with self._lock:
            self.peers.add(peer)
        try:
            assert ws.request is not None  # the handler runs only after a successful handshake
            if urlsplit(ws.request.path).path == "/acp":
                self._serve_acp(peer)
            else:
                self._serve_enveloped(peer)
        except Exception:
            log.exception("a WebSocket connection failed")
        finally:
            peer.client.let_go_all()
            with self._lock:
                self.peers.discard(peer)

    def _serve_acp(self, peer: Peer) -> None:
        """`/acp`: bare JSON-RPC frames, the same ACP server as stdio."""
        limit = self.options.max_message_bytes
        peer.acp = AcpServer(
            cast("OpenheimClient", peer.client),  # the connection's door: the client's API, ownership checked
            frames(peer.ws, limit),
            peer.out,
            limit,
            kill_children=False,
            allow_mcp_commands=self.options.allow_client_mcp_commands,
        )
        peer.acp.serve()

    def _serve_enveloped(self, peer: Peer) -> None:
        """`/ws`: ``{channel, data}`` frames; ``agent`` is ACP, ``fs`` the file sidecar."""
        out = peer.out.start()
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        peer.agent_writer = Writer(lambda lines: out.send_lines(AGENT_PREFIX + line[:-1] + b"}\n" for line in lines))
        peer.acp = AcpServer(
            cast("OpenheimClient", peer.client),  # the connection's door: the client's API, ownership checked
            iter(inbox.get, _END),
            peer.agent_writer,
            self.options.max_message_bytes,
            kill_children=False,
            allow_mcp_commands=self.options.allow_client_mcp_commands,
        )
        agent = threading.Thread(target=peer.acp.serve, name="ws-agent", daemon=True)
        agent.start()
        fs = FsChannel(
            self.root,
            lambda data: out.send({"channel": "fs", "data": data}),
            hub=self.watches,
            max_file_bytes=self.options.max_file_bytes,
        )
        out.send({"channel": "fs", "data": {"type": "connected", "message": "Connected to Openheim"}})
        try:
            for frame in frames(peer.ws):
                if frame is not None:  # (no limit given: every frame is one)
                    self._route(frame, inbox, fs, out)
        finally:
            inbox.put(_END)
            fs.close()
            agent.join(SHUTDOWN_GRACE + CLOSE_TIMEOUT)
            out.close()

    def _route(self, frame: str | bytes, inbox: queue.SimpleQueue, fs: FsChannel, out: Writer) -> None:
        """One `/ws` frame, parsed once: its data goes to the ACP server as parsed, or to the fs channel.
        A frame larger than an ACP message may only be an fs request; anything else that large is refused
        unparsed."""
        big = len(frame) > self.options.max_message_bytes
        head = frame[:64] if isinstance(frame, str) else frame[:64].decode("utf-8", "replace")
        if big and not FS_ENVELOPE.match(head):
            problem: str | None = (
                f"Invalid message: larger than {self.options.max_message_bytes} bytes (only an fs write may be larger)"
            )
            envelope = None
        else:
            envelope, problem = parse_envelope(frame)
        channel, data = (envelope.get("channel"), envelope.get("data")) if isinstance(envelope, dict) else (None, None)
        if channel == "agent" and not big:
            inbox.put(Parsed(data))
        elif channel == "fs":
            fs.handle(data)
        else:
            if problem is None:
                problem = 'Invalid message: expected {"channel": "agent" | "fs", "data": ...}'
                if channel is not None:
                    problem = f"Unknown channel {str(channel)[:40]!r}; use 'agent' or 'fs'"
            out.send({"channel": "system", "data": {"type": "error", "message": problem}})

    # --- shutdown -----------------------------------------------------------------------

    def shutdown(self, grace: float = SHUTDOWN_GRACE) -> None:
        """Cancel running turns (their sessions are saved as they end), let them answer, then close every
        socket with 1001 (going away) and stop listening."""
        with self._lock:
            peers = list(self.peers)
        servers = [peer.acp for peer in peers if peer.acp is not None]
        for acp in servers:  # every client's turns wind down at once
            acp.cancel_prompts()
        deadline = time.monotonic() + grace
        for acp in servers:
            acp.shutdown(max(0.0, deadline - time.monotonic()))
        for peer in peers:
            peer.flush(max(0.1, deadline - time.monotonic()))
        if self._server is not None:
            self._server.shutdown(code=1001, reason="openheim serve is shutting down")
        if self._thread is not None:
            self._thread.join(CLOSE_TIMEOUT)
