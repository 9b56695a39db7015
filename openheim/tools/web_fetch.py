"""web_fetch: GET one http(s) URL behind an SSRF guard, with the connection pinned to the checked address."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from openheim.core.tool_args import require_str
from openheim.core.tools import BaseTool, ToolView, ViewContext, short
from openheim.errors import ToolExecutionError
from openheim.tools.fetch_body import read_decoded
from openheim.tools.html_text import html_to_text
from openheim.tools.netguard import is_public, parse_address, parse_literal
from openheim.tools.specs import WEB_FETCH

if TYPE_CHECKING:
    from openheim.core.turn_context import CancelToken, TurnContext
    from openheim.tools.netguard import IPAddress

TIMEOUT = 20.0
MAX_BYTES = 262144
USER_AGENT = "openheim-web-fetch/1.0"

Resolver = Callable[[str, int], list[str]]


def resolve_within(resolve: Callable[[], list[str]], timeout: float, cancel: CancelToken | None) -> list[str]:
    """Run a (blocking) resolver in a helper thread so the deadline and cancel still apply."""
    values: list[list[str]] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            values.append(resolve())
        except BaseException as e:  # handed back to the caller below
            errors.append(e)
        finally:
            done.set()

    threading.Thread(target=work, name="web-fetch-resolve", daemon=True).start()
    remove = cancel.on_cancel(done.set) if cancel is not None else (lambda: None)
    try:
        finished = done.wait(timeout)
    finally:
        remove()
    if cancel is not None and cancel.cancelled:
        raise ToolExecutionError("web_fetch cancelled")
    if not finished:
        raise TimeoutError
    if errors:
        raise errors[0]
    return values[0]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for ``host``, in its order."""
    seen: list[str] = []
    for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        addr = str(info[4][0])
        if addr not in seen:
            seen.append(addr)
    return seen


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (the pinned IP) and what to ask for."""

    scheme: str
    host: str
    port: int
    ip: str
    path: str
    host_header: str


def allowed_content_type(mime: str) -> bool:
    """The reference's allow-list: empty, text/*, anything JSON or XML, XHTML."""
    return not mime or mime.startswith("text/") or "json" in mime or "xml" in mime or "xhtml" in mime


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'")
    return "utf-8"


def decode_body(body: bytes, content_type: str) -> str:
    try:
        return body.decode(_charset(content_type), errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def _pinned_connection(
    target: Target,
    timeout: float,
    tls_context: ssl.SSLContext | None = None,
    on_socket: Callable[[socket.socket], None] = lambda sock: None,
) -> http.client.HTTPConnection:
    """An http.client connection that connects to target.ip but speaks TLS/Host for target.host.

    ``on_socket`` receives every socket as soon as it exists, before it connects.
    """
    context = tls_context or ssl.create_default_context()

    class PinnedConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            family = socket.AF_INET6 if ":" in target.ip else socket.AF_INET
            self.sock = sock = socket.socket(family, socket.SOCK_STREAM)
            on_socket(sock)
            sock.settimeout(self.timeout)
            sock.connect((target.ip, target.port))
            if target.scheme == "https":
                self.sock = context.wrap_socket(sock, server_hostname=target.host)
                on_socket(self.sock)

    return PinnedConnection(target.ip, target.port, timeout=timeout)


class _Fetch:
    """One request with a total deadline; cancel and the deadline both shut the socket down.

    The socket is remembered here, not taken from the connection: with ``Connection: close``
    http.client hands the socket to the response and forgets it, while the body is still read.
    """

    def __init__(
        self,
        url: str,
        target: Target,
        timeout: float,
        cancel: CancelToken,
        tls_context: ssl.SSLContext | None = None,
        total: float | None = None,
    ) -> None:
        self.url, self.target, self.timeout, self.cancel = url, target, timeout, cancel
        self.total = timeout if total is None else total
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._aborted = False
        self.conn = _pinned_connection(target, timeout, tls_context, self._adopt)
        self.timed_out = False

    def _adopt(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            aborted = self._aborted
        if aborted:
            self._shutdown(sock)
            raise OSError("aborted")

    def _abort(self, timed_out: bool = False) -> None:
        self.timed_out = self.timed_out or timed_out
        with self._lock:
            self._aborted = True
            sock = self._sock
        if sock is not None:
            self._shutdown(sock)

    @staticmethod
    def _shutdown(sock: socket.socket) -> None:
        """Wake whatever blocks on ``sock`` (connect, TLS handshake, a read) from another thread."""
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain call, also for an SSLSocket
        except OSError:
            pass

    def run(self) -> str:
        timer = threading.Timer(self.timeout, self._abort, kwargs={"timed_out": True})
        timer.daemon = True
        timer.start()
        remove = self.cancel.on_cancel(self._abort)
        try:
            return self._exchange()
        except (OSError, ValueError, http.client.HTTPException) as e:
            if self.cancel.cancelled:
                raise ToolExecutionError("web_fetch cancelled") from None
            if self.timed_out or isinstance(e, TimeoutError):
                raise ToolExecutionError(f"Fetching {self.url} timed out after {self.total:g} seconds") from None
            raise ToolExecutionError(f"Fetching {self.url} failed: {e}") from None
        finally:
            timer.cancel()
            remove()
            self.conn.close()

    def _exchange(self) -> str:
        headers = {
            "Host": self.target.host_header,
            "User-Agent": USER_AGENT,
            "Accept": "text/html, text/plain, application/json, application/xml, */*;q=0.5",
            "Accept-Encoding": "gzip, deflate",
            "Connection": "close",
        }
        self.conn.request("GET", self.target.path, headers=headers)
        resp = self.conn.getresponse()
        result = interpret(self.url, resp.status, resp.getheader("Location"), resp.getheader("Content-Type") or "")
        if result is not None:
            return result
        body = read_decoded(resp, resp.getheader("Content-Encoding") or "", MAX_BYTES)
        if self.cancel.cancelled or self.timed_out:
            raise OSError("aborted")
        if len(body) <= MAX_BYTES and resp.length:
            raise OSError("the connection closed before the whole body arrived")
        return render(body, resp.getheader("Content-Type") or "")


def interpret(url: str, status: int, location: str | None, content_type: str) -> str | None:
    """The reply for a redirect, or None to go on reading; errors for other statuses and types (pure)."""
    if 300 <= status < 400 and location:
        return (
            f"{url} redirected (HTTP {status}) to {urljoin(url, location)}. Redirects are not followed; "
            "call web_fetch with that URL if you want its content."
        )
    if not 200 <= status < 300:
        raise ToolExecutionError(f"{url} returned HTTP {status}")
    mime = content_type.split(";")[0].strip().lower()
    if not allowed_content_type(mime):
        raise ToolExecutionError(
            f"{url} has unsupported content type '{mime}'; only text, HTML, JSON and XML can be fetched"
        )
    return None


def render(body: bytes, content_type: str) -> str:
    """The body as text: capped, decoded, HTML turned into readable text (pure)."""
    truncated = len(body) > MAX_BYTES
    text = decode_body(body[:MAX_BYTES], content_type)
    mime = content_type.split(";")[0].strip().lower()
    if mime == "text/html" or "xhtml" in mime:
        # imported here: its patterns compile on the first fetch, not at start-up
        text = html_to_text(text)
    if truncated:
        text += f"\n[content truncated at {MAX_BYTES} bytes]\n"
    return text


class WebFetchTool(BaseTool):
    """Fetch a public web page as text."""

    name, description, parameters, capabilities = WEB_FETCH.fields()

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        url = (args or {}).get("url")
        title = f"Fetch {short(url)}" if url else self.name
        return ToolView(title, self.capabilities.kind)

    def __init__(
        self,
        resolver: Resolver | None = None,
        *,
        allowed_addresses: Iterable[str] = (),
        timeout: float = TIMEOUT,
        tls_context: ssl.SSLContext | None = None,
    ) -> None:
        """``resolver``, ``allowed_addresses`` and ``tls_context`` are test seams; no config reaches them."""
        self._resolver = resolver or system_resolver
        self._allowed: frozenset[IPAddress] = frozenset()
        if allowed_addresses:
            self._allowed = frozenset(parse_address(a) for a in allowed_addresses)
        self._timeout = timeout
        self._tls_context = tls_context

    def _permitted(self, addr: IPAddress) -> bool:
        return addr in self._allowed or is_public(addr)

    def check_url(self, url: str, cancel: CancelToken | None = None) -> Target:
        """Validate the URL and pick the address to connect to, or refuse."""
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError as e:
            raise ToolExecutionError(f"Invalid URL {url}: {e}") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise ToolExecutionError(f"Unsupported URL scheme '{scheme}'; only http and https URLs can be fetched")
        if not host:
            raise ToolExecutionError(f"URL has no host: {url}")
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            raise ToolExecutionError(f"URL has an invalid port: {url}") from None
        ip = self._pick_address(host, port, cancel)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        shown = f"[{host}]" if ":" in host else host
        host_header = shown if parts.port is None else f"{shown}:{port}"
        return Target(scheme, host, port, ip, path, host_header)

    def _pick_address(self, host: str, port: int, cancel: CancelToken | None) -> str:
        literal = parse_literal(host)
        if literal is not None:
            if not self._permitted(literal):
                raise ToolExecutionError(f"Refusing to fetch {host}: address is not publicly routable")
            return str(literal)
        try:
            answers = resolve_within(lambda: self._resolver(host, port), self._timeout, cancel)
        except TimeoutError:
            raise ToolExecutionError(f"Resolving {host} timed out after {self._timeout:g} seconds") from None
        except (OSError, UnicodeError) as e:
            raise ToolExecutionError(f"Could not resolve {host}: {e}") from None
        if not answers:
            raise ToolExecutionError(f"Could not resolve {host}: no addresses")
        for answer in answers:
            try:
                addr = parse_address(answer)
            except ValueError:
                raise ToolExecutionError(f"Refusing to fetch {host}: resolves to unparsable address {answer}") from None
            if not self._permitted(addr):
                raise ToolExecutionError(f"Refusing to fetch {host}: resolves to non-public address {answer}")
        return str(parse_address(answers[0]))

    def execute(self, args: dict, ctx: TurnContext) -> str:
        url = require_str(args, "url").strip()
        started = time.monotonic()
        target = self.check_url(url, ctx.cancel)
        remaining = max(0.01, self._timeout - (time.monotonic() - started))
        if ctx.cancel.cancelled:
            raise ToolExecutionError("web_fetch cancelled")
        return _Fetch(url, target, remaining, ctx.cancel, self._tls_context, self._timeout).run()
