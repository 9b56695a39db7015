"""Signing in to an HTTP MCP server with OAuth (the SDK's client flow), in a way that works over SSH.

``openheim mcp login NAME`` prints the authorization address and takes the redirect either on a
loopback port (a browser on this machine) or pasted back by the user (a browser elsewhere). Tokens
live in ``{data_dir}/mcp-auth/NAME.json`` (mode 0600), are refreshed by the SDK when they expire and
saved again, and are never printed or logged. Servers without a stored login connect as before; one
that answers 401 is reported as "needs login".
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import parse_qs, quote, urlsplit

from openheim.errors import InvalidArgument, OpenheimError
from openheim.mcp.bridge import Bridge

if TYPE_CHECKING:
    from openheim.config.schema import McpServerConfig

log = logging.getLogger(__name__)

AUTH_DIR = "mcp-auth"
CALLBACK_PATH = "/callback"
NEEDS_LOGIN = "needs login"
LOGIN_TIMEOUT = 300.0
_DONE_PAGE = "<!doctype html><title>openheim</title><p>{}</p>"


class NeedsLogin(Exception):
    """The server asked for an OAuth sign-in that only `openheim mcp login` may start."""


class LoginFailed(OpenheimError):
    """The sign-in did not complete; the message says why and what to do."""


def token_path(data_dir: Path, name: str) -> Path:
    return data_dir / AUTH_DIR / f"{quote(name, safe='')}.json"


def needs_login_message(name: str) -> str:
    return f"{NEEDS_LOGIN}: run `openheim mcp login {name}`"


def is_logged_in(data_dir: Path, name: str) -> bool:
    return token_path(data_dir, name).is_file()


def logout(data_dir: Path, name: str) -> bool:
    """Forget the server's tokens and registration; False when there were none."""
    try:
        token_path(data_dir, name).unlink()
    except FileNotFoundError:
        return False
    return True


def wants_login(error: BaseException) -> bool:
    """Whether a failed connection means the server needs a sign-in (NeedsLogin, or an HTTP 401 answer)."""
    seen: set[int] = set()
    stack = [error]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, NeedsLogin):
            return True
        response = getattr(e, "response", None)
        if getattr(response, "status_code", None) == 401:
            return True
        if "401 Unauthorized" in str(e):
            return True
        stack.extend(getattr(e, "exceptions", ()) or ())
        for linked in (e.__cause__, e.__context__):
            if linked is not None:
                stack.append(linked)
    return False


class AuthWatch:
    """An httpx2 response hook that notes a 401 asking for a bearer token (the SDK reports it only as a generic
    error), so a failed connection can say "needs login"."""

    def __init__(self) -> None:
        self.unauthorized = False

    async def __call__(self, response: Any) -> None:
        if response.status_code == 401 and "bearer" in response.headers.get("www-authenticate", "").lower():
            self.unauthorized = True


# --- token storage ----------------------------------------------------------------------------


class FileTokenStorage:
    """The SDK's TokenStorage over one 0600 JSON file, bound to the server's URL.

    A token past its recorded expiry is handed back without its access token, so the SDK refreshes
    it (with the refresh token) before the first request instead of sending a stale one.
    """

    def __init__(self, path: Path, server_url: str) -> None:
        self.path, self.server_url = path, server_url

    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("server_url") != self.server_url:
            return {}  # stored for another address: not sent there
        return data

    def save(self, data: dict) -> None:
        data["server_url"] = self.server_url
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".login.", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    async def get_tokens(self) -> Any:
        from mcp.shared.auth import OAuthToken

        data = self._load()
        tokens = data.get("tokens")
        if not isinstance(tokens, dict):
            return None
        expires_at = data.get("expires_at")
        if isinstance(expires_at, (int, float)) and time.time() >= expires_at - 30:
            tokens = {**tokens, "access_token": ""}  # expired: the SDK refreshes it first
        return OAuthToken.model_validate(tokens)

    async def set_tokens(self, tokens: Any) -> None:
        data = self._load()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        data["expires_at"] = time.time() + tokens.expires_in if tokens.expires_in else None
        self.save(data)

    async def get_client_info(self) -> Any:
        from mcp.shared.auth import OAuthClientInformationFull

        info = self._load().get("client_info")
        return OAuthClientInformationFull.model_validate(info) if isinstance(info, dict) else None

    async def set_client_info(self, client_info: Any) -> None:
        data = self._load()
        data["client_info"] = client_info.model_dump(mode="json", exclude_none=True)
        self.save(data)


def _client_metadata(redirect_uri: str) -> Any:
    from mcp.shared.auth import OAuthClientMetadata

    return OAuthClientMetadata(
        client_name="openheim",
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )


async def _refuse_interactive(url: str) -> None:
    raise NeedsLogin("the server needs a sign-in")


async def _no_callback() -> Any:
    raise NeedsLogin("the server needs a sign-in")


def auth_for(config: McpServerConfig, data_dir: Path) -> Any:
    """The httpx2 Auth a connection to ``config`` uses: the stored login (refreshed as needed), or None when
    there is none (or the server has its own Authorization header)."""
    if not config.url or any(k.lower() == "authorization" for k in config.headers):
        return None
    path = token_path(data_dir, config.name)
    if not path.is_file():
        return None
    from mcp.client.auth import OAuthClientProvider

    storage = FileTokenStorage(path, config.url)
    return OAuthClientProvider(
        server_url=config.url,
        client_metadata=_client_metadata(f"http://127.0.0.1{CALLBACK_PATH}"),
        storage=storage,
        redirect_handler=_refuse_interactive,
        callback_handler=_no_callback,
    )


# --- the interactive sign-in ------------------------------------------------------------------


def parse_redirect(text: str) -> dict[str, str]:
    """The query parameters of the redirect: the whole address pasted, its path and query (what reaches the
    loopback catcher: ``/callback?code=...``), or just the query. LoginFailed when it has no ``code`` (an
    ``error`` the server sent is named)."""
    line = text.strip().strip("'\"")
    query = urlsplit(line).query if "://" in line or line.startswith("/") else line.lstrip("?")
    params = {k: v[0] for k, v in parse_qs(query).items() if v}
    if "error" in params:
        detail = params.get("error_description") or params["error"]
        raise LoginFailed(f"the server refused the sign-in: {detail}")
    if "code" not in params:
        raise LoginFailed(
            "that is not the address the browser was sent to (it has no code=...); "
            "paste the whole address from the browser's address bar"
        )
    return params


def _is_redirect(query: str) -> bool:
    """Whether a request to the catcher is the authorization server's redirect (a code or an error)."""
    params = parse_qs(query)
    return "code" in params or "error" in params


class _CallbackHandler(BaseHTTPRequestHandler):
    """The loopback redirect's landing: hands the sign-in's answer to ``catcher`` and tells the browser."""

    catcher: _Catcher

    def log_message(self, format: str, *args: Any) -> None:  # the address holds the code: never log it
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path != CALLBACK_PATH:
            self.send_error(404)
            return
        if not _is_redirect(url.query):  # not the sign-in's redirect (a reload, a probe): ignored
            self._page(400, "This is openheim's sign-in address; it waits for the sign-in's redirect.")
            return
        self.catcher.answers.put(("loopback", self.path))
        try:
            parse_redirect(self.path)
        except LoginFailed as e:
            self._page(400, f"Sign-in failed: {e}. Return to the terminal.")
            return
        self._page(200, "Signed in. You can close this tab and return to the terminal.")

    def _page(self, status: int, text: str) -> None:
        body = _DONE_PAGE.format(html.escape(text)).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Catcher:
    """Where the redirect arrives: a loopback listener and, when stdin is readable, a pasted line."""

    def __init__(self, port: int, stdin: TextIO | None) -> None:
        self.answers: queue.Queue[tuple[str, str]] = queue.Queue()
        handler = type("Handler", (_CallbackHandler,), {"catcher": self})
        try:
            self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError as e:
            raise LoginFailed(
                f"cannot listen on 127.0.0.1:{port} for the redirect ({e.strerror or e}); pass another --port"
            ) from None
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, name="openheim-login", daemon=True).start()
        if stdin is not None:
            threading.Thread(target=self._read_pasted, args=(stdin,), name="openheim-login-paste", daemon=True).start()

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    def _read_pasted(self, stdin: TextIO) -> None:
        try:
            for line in stdin:
                if line.strip():
                    self.answers.put(("paste", line))
                    return
        except (OSError, ValueError):
            return

    def wait(self, timeout: float) -> dict[str, str]:
        try:
            _, text = self.answers.get(timeout=timeout)
        except queue.Empty:
            raise LoginFailed(f"no redirect arrived within {timeout:g}s; run `openheim mcp login` again") from None
        return parse_redirect(text)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def login(
    config: McpServerConfig,
    data_dir: Path,
    out: TextIO,
    stdin: TextIO | None,
    port: int = 0,
    timeout: float = LOGIN_TIMEOUT,
) -> int:
    """Sign in to ``config``'s server: register, print the authorization address, wait for the redirect
    (loopback or pasted), exchange the code and store the tokens; returns the number of tools it offers."""
    if not config.url:
        raise InvalidArgument(f"MCP server '{config.name}' is a stdio server; only HTTP servers sign in")

    catcher = _Catcher(port, stdin)
    fresh = FileTokenStorage(Path(tempfile.mkdtemp(prefix="openheim-login-")) / "login.json", config.url)
    try:
        tools = _sign_in(config, fresh, catcher, out, timeout)
        saved = json.loads(fresh.path.read_text(encoding="utf-8"))
        FileTokenStorage(token_path(data_dir, config.name), config.url).save(saved)
        return tools
    finally:
        catcher.close()
        _remove_tree(fresh.path.parent)


def _sign_in(config: McpServerConfig, fresh: FileTokenStorage, catcher: _Catcher, out: TextIO, timeout: float) -> int:
    """The SDK's authorization-code flow on a bridge of its own, the tokens kept in ``fresh``."""

    async def show(url: str) -> None:
        out.write(
            f"Open this address in a browser to sign in to '{config.name}':\n\n  {url}\n\n"
            f"Waiting for the browser to return to {catcher.redirect_uri}.\nIf the browser is on another "
            "machine, paste here the address it was sent to (it starts with that address):\n"
        )
        out.flush()

    async def callback() -> Any:
        from mcp.shared.auth import AuthorizationCodeResult

        params = await asyncio.get_running_loop().run_in_executor(None, catcher.wait, timeout)
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    bridge = Bridge()
    try:
        if bridge.import_error:
            raise LoginFailed(bridge.import_error)
        future = bridge.submit(_connect_with_login(config, fresh, catcher.redirect_uri, show, callback))
        try:
            return int(future.result(timeout + 60))
        except (LoginFailed, InvalidArgument):
            raise
        except Exception as e:
            raise LoginFailed(f"signing in to '{config.name}' failed: {_reason(e)}") from None
    finally:
        bridge.stop()


def _remove_tree(directory: Path) -> None:
    for child in directory.glob("*"):
        child.unlink(missing_ok=True)
    try:
        directory.rmdir()
    except OSError:
        pass


def _reason(error: BaseException) -> str:
    leaves = list(getattr(error, "exceptions", ()) or ())
    while leaves and getattr(leaves[0], "exceptions", None):
        leaves = list(leaves[0].exceptions)
    leaf = leaves[0] if leaves else error
    if isinstance(leaf, LoginFailed):
        return leaf.message
    return " ".join(str(leaf).split())[:300] or type(leaf).__name__


async def _connect_with_login(
    config: McpServerConfig,
    storage: FileTokenStorage,
    redirect_uri: str,
    show: Callable[[str], Any],
    callback: Callable[[], Any],
) -> int:
    """Connect with the SDK's OAuth client (which runs the authorization-code flow on the 401) and list tools."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client

    provider = OAuthClientProvider(
        server_url=config.url or "",
        client_metadata=_client_metadata(redirect_uri),
        storage=storage,
        redirect_handler=show,
        callback_handler=callback,
    )
    async with httpx2.AsyncClient(
        auth=provider, headers=dict(config.headers) or None, timeout=httpx2.Timeout(30.0, read=LOGIN_TIMEOUT + 30)
    ) as client:
        async with streamable_http_client(config.url or "", http_client=client) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                listed = await session.list_tools()
                return len(listed.tools)
