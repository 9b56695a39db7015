"""One MCP server: its owner task on the bridge loop, its tools, calls with deadlines, reconnects, status.

The owner task enters the transport and ``ClientSession`` contexts, initializes, lists the tools,
then waits for its stop event, so the SDK's contexts are entered and left by the same task. A call
from a worker thread is a small coroutine on the same loop; if the transport has closed (the server
exited), it first reconnects once (a failed reconnect is remembered for 30 s).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from openheim.config.secrecy import scrub_url
from openheim.errors import Cancelled, ToolExecutionError
from openheim.mcp import known
from openheim.mcp.bridge import kill_group
from openheim.mcp.content import result_text
from openheim.mcp.framing import DEFAULT_MAX_MESSAGE
from openheim.mcp.server_log import ServerLog, log_path
from openheim.mcp.status import McpServerStatus
from openheim.mcp.stdio import Link, stdio_transport
from openheim.mcp.tool import McpTool
from openheim.sandbox.policy import Sandbox

if TYPE_CHECKING:
    import asyncio

    from openheim.config.schema import McpServerConfig
    from openheim.core.turn_context import CancelToken
    from openheim.mcp.bridge import Bridge
    from openheim.mcp.oauth import AuthWatch

log = logging.getLogger(__name__)

CONNECT_LIMIT = 60.0  # seconds a server gets to start, initialize and list its tools
FAILURE_TTL = 30.0  # a failed reconnect is not retried for this long
CLOSE_LIMIT = 8.0  # the SDK's own shutdown (stdin EOF, SIGTERM, SIGKILL) ends within about 6 s
MAX_TOOL_PAGES = 100
MAX_PROMPTS = 200  # prompts kept of one server (each is a command in the chat and in an editor)
PROBE_LIMIT = 10.0  # seconds for listing a server's resources and prompts after it connected
REQUEST_LIMIT = 60.0  # seconds for a resources or prompts request (not a tool call)
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
T = TypeVar("T")


class CallFailed(Exception):
    """A call failed for a reason already put in words for the model."""


def leaf_error(error: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, which anyio wraps errors in."""
    import asyncio

    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        inner = [e for e in error.exceptions if not isinstance(e, asyncio.CancelledError)]
        error = (inner or list(error.exceptions))[0]
    return error


def describe(error: BaseException) -> str:
    error = leaf_error(error)
    text = " ".join(str(error).split())
    return text or type(error).__name__


def error_code(error: BaseException) -> int | None:
    code = getattr(leaf_error(error), "code", None)
    return code if isinstance(code, int) else None


def session_gone(error: BaseException) -> bool:
    """Streamable HTTP: the server does not know our session (it restarted), so the request never ran."""
    text = str(leaf_error(error)).lower()
    return "session" in text and ("terminated" in text or "not found" in text)


def transport_lost(error: BaseException) -> bool:
    """Whether a failed request means the connection is gone (so the next call reconnects)."""
    leaf = leaf_error(error)
    if error_code(leaf) == CONNECTION_CLOSED or session_gone(leaf):
        return True
    return isinstance(leaf, (OSError, EOFError)) or type(leaf).__module__.startswith(("httpx2", "httpcore2", "anyio"))


class McpServer:
    """A server's connection and tools. ``start`` connects in the background; ``call`` runs one tool."""

    def __init__(
        self,
        config: McpServerConfig,
        bridge: Callable[[], Bridge],
        log_dir: Path,
        on_change: Callable[[], None] = lambda: None,
        data_dir: Path | None = None,
        startup_timeout: float = 10.0,
        max_message: int = DEFAULT_MAX_MESSAGE,
    ) -> None:
        self.config = config
        self.name = config.name
        self._bridge_of = bridge  # the hub's bridge, made (and the SDK imported) when the first server starts
        self._log_dir = log_dir
        self._data_dir = data_dir
        self._on_change = on_change
        self.startup_timeout = startup_timeout
        self.max_message = max_message
        self._lock = threading.Lock()
        self.state = "starting"
        self.error: str | None = None
        remembered = known.recall(data_dir, config) if data_dir is not None else None
        self.known = remembered is not None  # its last tool list is offered while it starts
        self.tools: list[McpTool] = self._handlers(remembered) if remembered else []
        extras = known.recall_extras(data_dir, config) if data_dir is not None else {}
        self.has_resources = extras.get("resources") is True  # it lists resources (or resource templates)
        self.prompts: list[dict] = list(extras.get("prompts") or [])  # its prompts/list, as wire JSON
        self.started_at = time.monotonic()
        self.started = False
        self.settled = threading.Event()  # the first connect ended, either way
        # touched on the loop thread only
        self._session: Any = None
        self._owner: asyncio.Task | None = None
        self._stop: asyncio.Event | None = None
        self._ready: asyncio.Future | None = None
        self._reconnecting: asyncio.Future | None = None
        self._relisting: asyncio.Future | None = None  # a listing after tools/list_changed
        self._broken = False
        self._link: Link | None = None
        self._closing = False
        self._failed_until = 0.0
        self._failure = ""
        self._pids: set[int] = set()
        self._specs: list[dict] = []
        self._auth_watch: AuthWatch | None = None

    # --- lifecycle (sync side) -----------------------------------------------------------

    def start(self) -> None:
        """Connect in the background (once)."""
        with self._lock:
            if self.started or self.state == "closed":
                return
            self.started, self.started_at = True, time.monotonic()
        self._bridge = self._bridge_of()
        self._bridge.submit(self._first_connect())

    def close_async(self) -> concurrent.futures.Future:
        """Stop the server (its owner leaves the SDK contexts, which ends the process); returns at once."""
        with self._lock:
            never_started = not self.started
            if never_started:
                self.state, self.tools = "closed", []
        if never_started:
            self.settled.set()
            done: concurrent.futures.Future = concurrent.futures.Future()
            done.set_result(None)
            return done
        return self._bridge.submit(self._close())

    def pids(self) -> list[int]:
        """The server processes (each leads its own process group) that are running now."""
        with self._lock:
            return list(self._pids)

    def kill_leftovers(self) -> None:
        """Last resort after a close that did not finish: SIGKILL the server's process group."""
        with self._lock:
            pids = list(self._pids)
        if pids:
            for pid in pids:
                kill_group(pid)

    @property
    def log_file(self) -> Path:
        return log_path(self._log_dir, self.name)

    # --- calls (sync side) ------------------------------------------------------------------

    def wait_started(self, cancel: CancelToken | None = None) -> None:
        """A call to a remembered tool of a server still starting waits for it (up to the startup timeout);
        ToolExecutionError when it is not up then, failed, or no longer offers the tool."""
        self.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self.settled.is_set() and not (cancel is not None and cancel.cancelled):
            left = deadline - time.monotonic()
            if left <= 0:
                raise ToolExecutionError(
                    f"MCP server '{self.name}' not ready after {self.startup_timeout:g} s; try the tool again later"
                )
            self.settled.wait(min(left, 0.05))
        if cancel is not None and cancel.cancelled:
            raise Cancelled("MCP tool call cancelled")
        with self._lock:
            state, error = self.state, self.error
        if state == "failed":
            raise ToolExecutionError(error or f"MCP server '{self.name}' failed to start")

    def gave_up(self) -> None:
        """A turn stopped waiting for this never-seen server: remember it (with no tools), so the next
        session offers nothing from it at first but does not wait for it either."""
        if self._data_dir is not None and self.started and not self.known and not self.settled.is_set():
            known.remember(self._data_dir, self.config, [])

    def call(self, tool: str, arguments: dict, cancel: CancelToken | None = None) -> str:
        """Run ``tool``; the result's text, or ToolExecutionError (isError results, failures, the deadline)."""
        self.wait_started(cancel)
        with self._lock:
            offered = any(t.tool_name == tool for t in self.tools)
        if not offered:
            raise ToolExecutionError(f"MCP server '{self.name}' no longer offers the tool '{tool}'")
        limit = self.config.tool_timeout_secs
        result = self._wait(
            self._bridge.submit(self._call(tool, arguments, float(limit))),
            limit,
            cancel,
            late=f"MCP tool '{tool}' on '{self.name}' did not finish within {limit}s",
            cancelled="MCP tool call cancelled",
            failed=f"MCP tool '{tool}' on '{self.name}' failed",
        )
        text = result_text(result)
        if result.get("isError"):
            raise ToolExecutionError(text or f"MCP tool '{tool}' on '{self.name}' reported an error")
        return text

    def request(
        self,
        what: str,
        work: Callable[[Any], Awaitable[T]],
        cancel: CancelToken | None = None,
        limit: float = REQUEST_LIMIT,
    ) -> T:
        """``work(session)`` on the bridge loop (a resources or prompts request), once the server is up;
        ToolExecutionError saying ``what`` failed and why."""
        self.wait_started(cancel)
        return self._wait(
            self._bridge.submit(self._request(what, work)),
            limit,
            cancel,
            late=f"MCP server '{self.name}' did not answer {what} within {limit:g} s",
            cancelled=f"MCP {what} cancelled",
            failed=f"MCP {what} on '{self.name}' failed",
        )

    def _wait(
        self,
        future: concurrent.futures.Future[T],
        limit: float,
        cancel: CancelToken | None,
        *,
        late: str,
        cancelled: str,
        failed: str,
    ) -> T:
        """The bridge's answer within ``limit`` seconds; a cancel cancels it. Failures become one-line
        errors: ``late`` past the deadline, ``cancelled``, or ``failed: <why>`` (secrets scrubbed)."""
        remove = cancel.on_cancel(future.cancel) if cancel is not None else (lambda: None)
        try:
            return future.result(timeout=limit)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolExecutionError(late) from None
        except concurrent.futures.CancelledError:
            raise Cancelled(cancelled) from None
        except CallFailed as e:
            raise ToolExecutionError(str(e)) from None
        except Exception as e:
            raise ToolExecutionError(f"{failed}: {self._scrub(describe(e))}") from None
        finally:
            remove()

    async def _request(self, what: str, work: Callable[[Any], Awaitable[T]]) -> T:
        session = await self._live_session()
        try:
            return await work(session)
        except Exception as e:
            if transport_lost(e):
                self._broken = True
                self._on_change()
            raise CallFailed(f"MCP {what} on '{self.name}' failed: {self._scrub(describe(e))}") from None

    # --- status ---------------------------------------------------------------------------------

    def status(self) -> McpServerStatus:
        with self._lock:
            state, error, tools = self.state, self.error, list(self.tools)
            prompts, resources = tuple(str(p.get("name")) for p in self.prompts), self.has_resources
        if state == "connected" and self._transport_closed():
            state = "disconnected"
            error = error or "the server closed its connection; it is restarted on the next call"
        cfg = self.config
        return McpServerStatus(
            name=self.name,
            transport=cfg.transport,
            source=cfg.source,
            state=state,
            connected=state == "connected",
            tool_count=len(tools),
            error=error,
            command=cfg.command if cfg.transport == "stdio" else None,
            url=scrub_url(cfg.url) if cfg.url else None,
            tools=tuple(t.name for t in tools),
            prompts=prompts,
            resources=resources,
        )

    def _set(self, state: str, error: str | None = None, tools: list[McpTool] | None = None) -> None:
        with self._lock:
            self.state, self.error = state, error
            if tools is not None:
                self.tools = tools
        self._on_change()

    def _scrub(self, text: str) -> str:
        url = self.config.url
        return text.replace(url, scrub_url(url)) if url else text

    # --- the loop side ----------------------------------------------------------------------------

    async def _first_connect(self) -> None:
        import asyncio

        try:
            tools = await self._open()
            if self._closing:
                raise CallFailed("closed while starting")
            self._set("connected", None, tools)
            if self._data_dir is not None:
                known.remember(self._data_dir, self.config, self._specs, self._extras())
        except BaseException as e:
            message = str(e) if isinstance(e, CallFailed) else f"MCP server '{self.name}' failed: {describe(e)}"
            from openheim.mcp.oauth import NEEDS_LOGIN

            state = NEEDS_LOGIN if NEEDS_LOGIN in message else "failed"
            self._set("closed" if self._closing else state, None if self._closing else message, [])
            if not self._closing:
                log.warning("%s", message)
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            self.settled.set()
            self._on_change()

    async def _open(self) -> list[McpTool]:
        """Start an owner task and wait until it is connected; CallFailed with the reason when it is not."""
        import asyncio

        loop = asyncio.get_running_loop()
        ready: asyncio.Future = loop.create_future()
        stop = asyncio.Event()
        self._ready, self._stop, self._broken, self._link = ready, stop, False, None
        self._owner = asyncio.ensure_future(self._own(ready, stop))
        session, specs = await ready
        self._session, self._specs = session, specs
        await self._probe(session)
        return self._handlers(specs)

    async def _probe(self, session: Any) -> None:
        """Whether the server lists resources, and its prompts, asked at once (what fails to list counts as none)."""
        import asyncio

        async def bounded(what: str, lister: Callable[[Any], Awaitable[T]], none: T) -> T:
            try:
                return await asyncio.wait_for(lister(session), PROBE_LIMIT)
            except Exception as e:
                log.info("MCP server '%s': listing its %s failed: %s", self.name, what, describe(e))
                return none

        no_prompts: list[dict] = []
        has_resources, prompts = await asyncio.gather(
            bounded("resources", _has_resources, False), bounded("prompts", _list_prompts, no_prompts)
        )
        with self._lock:
            self.has_resources, self.prompts = has_resources, prompts

    def _extras(self) -> dict:
        with self._lock:
            return {"resources": self.has_resources, "prompts": list(self.prompts)}

    def _handlers(self, specs: list[dict]) -> list[McpTool]:
        tools: dict[str, McpTool] = {}
        for spec in specs:
            tool = McpTool(self, spec)
            if tool.name in tools:
                log.warning(
                    "MCP server '%s': tools '%s' and '%s' share the name %s; the first is kept",
                    self.name,
                    tools[tool.name].tool_name,
                    tool.tool_name,
                    tool.name,
                )
                continue
            tools[tool.name] = tool
        return list(tools.values())

    async def _own(self, ready: asyncio.Future, stop: asyncio.Event) -> None:
        """The owner task: enter the transport and session, initialize, list tools, wait for stop."""
        import asyncio
        from contextlib import AsyncExitStack

        import anyio

        phase, server_log = "spawn", None
        try:
            async with AsyncExitStack() as stack:
                if self.config.url:
                    await self._sdk()
                    phase = "connect"
                    streams = await self._enter_http(stack)
                else:
                    server_log = self._open_log()
                    streams = await self._enter_stdio(stack, server_log)  # spawned while the SDK loads
                    phase = "connect"
                from mcp import ClientSession

                session = await stack.enter_async_context(
                    ClientSession(streams[0], streams[1], message_handler=self._on_message)
                )
                with anyio.fail_after(CONNECT_LIMIT):
                    await session.initialize()
                    phase = "list"
                    specs = await _list_tools(session)
                if ready.done():  # nobody waits for this connection any more
                    return
                ready.set_result((session, specs))
                await stop.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(CallFailed(self._connect_failure(phase, e)))
            elif not isinstance(e, asyncio.CancelledError):
                log.debug("MCP server '%s' ended with %s", self.name, describe(e))
        finally:
            if server_log is not None:
                server_log.close()
            self.kill_leftovers()  # children the server left behind in its process group
            with self._lock:
                self._pids.clear()

    async def _on_message(self, message: Any) -> None:
        """``notifications/tools/list_changed``: list the tools again, on a task of its own (this runs on the
        session's reader, which the listing's answer needs)."""
        import asyncio

        from mcp.types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification) and not self._closing:
            self._relisting = asyncio.ensure_future(self._relist())

    async def _relist(self) -> None:
        """The live tool list replaces the offered one (the next model request sees it) and is remembered."""
        session = self._session
        if session is None:
            return  # not connected yet: the first listing is still to come
        try:
            specs = await _list_tools(session)
        except Exception as e:
            if not self._closing:
                log.warning("MCP server '%s' changed its tools, but listing them failed: %s", self.name, describe(e))
            return
        if session is not self._session or self._closing:
            return
        self._specs = specs
        self._set("connected", None, self._handlers(specs))
        if self._data_dir is not None:
            known.remember(self._data_dir, self.config, specs)

    async def _sdk(self) -> None:
        """Wait for the SDK's import (begun with the bridge); CallFailed saying how to install it if it failed."""
        error = await self._bridge.sdk()
        if error:
            raise CallFailed(error)

    def _remember_pid(self, pid: int) -> None:
        with self._lock:
            self._pids.add(pid)

    async def _enter_stdio(self, stack: Any, server_log: ServerLog) -> Any:
        cfg = self.config
        argv = _sandboxed([cfg.command or "", *cfg.args], cfg.sandbox, cfg.cwd)
        link = self._link = Link(self.name, self.max_message)
        streams = await stack.enter_async_context(stdio_transport(cfg, argv, link, server_log, self._sdk))
        if link.pid is not None:
            self._remember_pid(link.pid)
        return streams

    async def _enter_http(self, stack: Any) -> Any:
        import httpx2

        cfg = self.config
        if cfg.sse:
            from mcp.client.sse import sse_client

            return await stack.enter_async_context(
                sse_client(cfg.url or "", headers=dict(cfg.headers) or None, timeout=30.0, sse_read_timeout=300.0)
            )
        from mcp.client.streamable_http import streamable_http_client

        from openheim.mcp.oauth import AuthWatch, auth_for

        self._auth_watch = AuthWatch()  # a 401 means "needs login"
        client = httpx2.AsyncClient(
            headers=dict(cfg.headers) or None,
            timeout=httpx2.Timeout(30.0, read=300.0),
            auth=auth_for(cfg, self._log_dir.parent),  # a stored sign-in
            event_hooks={"response": [self._auth_watch]},
        )
        await stack.enter_async_context(client)
        return await stack.enter_async_context(streamable_http_client(cfg.url or "", http_client=client))

    def _open_log(self) -> ServerLog:
        """The server's stderr goes to {data_dir}/logs/mcp-{name}.log (never the terminal or ACP's stdout)."""
        server_log = ServerLog(self.log_file)
        server_log.note(f"starting '{self.name}' ({self.config.command})")
        return server_log

    def _connect_failure(self, phase: str, error: BaseException) -> str:
        leaf = leaf_error(error)
        if isinstance(leaf, CallFailed):  # already in words (the SDK is missing)
            return str(leaf)
        if isinstance(leaf, TimeoutError):
            return f"MCP server '{self.name}' did not start within {int(CONNECT_LIMIT)}s"
        reason = self._scrub(describe(leaf))
        if self.config.url:
            from openheim.mcp.oauth import needs_login_message, wants_login

            if wants_login(error) or (self._auth_watch is not None and self._auth_watch.unauthorized):
                return f"MCP server '{self.name}' {needs_login_message(self.name)}"
        if phase == "spawn":
            return f"MCP spawn '{self.name}' failed: {reason}"
        if phase == "list":
            return f"MCP list_tools failed for '{self.name}': {reason}"
        if self.config.url:
            return f"MCP HTTP connect to '{self.name}' failed: {reason}"
        return f"MCP stdio connect to '{self.name}' failed: {reason} (its stderr is in {self.log_file})"

    def _transport_closed(self) -> bool:
        """Known closed: never opened, a call saw the transport go, or (stdio) our own transport saw the
        server's output end."""
        if self._session is None or self._broken:
            return True
        return self._link is not None and self._link.closed

    async def _call(self, tool: str, arguments: dict, limit: float) -> dict:
        session = await self._live_session()
        try:
            try:
                result = await session.call_tool(tool, arguments or None, read_timeout_seconds=limit)
            except Exception as e:
                if not session_gone(e):
                    raise
                self._broken = True  # refused before it ran: reconnect and send it again, once
                session = await self._live_session()
                result = await session.call_tool(tool, arguments or None, read_timeout_seconds=limit)
        except CallFailed:
            raise
        except Exception as e:
            if error_code(e) == REQUEST_TIMEOUT:
                raise CallFailed(f"MCP tool '{tool}' on '{self.name}' did not finish within {int(limit)}s") from None
            if transport_lost(e):
                self._broken = True
                self._on_change()
            raise CallFailed(f"MCP tool '{tool}' on '{self.name}' failed: {self._scrub(describe(e))}") from None
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _live_session(self) -> Any:
        import asyncio

        if self._closing:
            raise CallFailed(f"MCP server '{self.name}' is closed")
        if self._session is not None and not self._transport_closed():
            return self._session
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.ensure_future(self._reconnect())
        return await asyncio.shield(self._reconnecting)  # a caller that gives up does not abort the reconnect

    async def _reconnect(self) -> Any:
        if time.monotonic() < self._failed_until:
            raise CallFailed(self._failure)
        await self._shutdown_owner()
        try:
            tools = await self._open()
        except BaseException as e:
            reason = str(e) if isinstance(e, CallFailed) else describe(e)
            self._failure = f"MCP server '{self.name}' closed its connection and reconnecting failed: {reason}"
            self._failed_until = time.monotonic() + FAILURE_TTL
            self._set("disconnected", self._failure)
            log.warning("%s", self._failure)
            raise CallFailed(self._failure) from None
        self._set("connected", None, tools)
        log.info("MCP server '%s' reconnected", self.name)
        return self._session

    async def _shutdown_owner(self) -> None:
        import asyncio

        owner, stop, ready = self._owner, self._stop, self._ready
        self._owner = self._stop = self._ready = self._session = None
        if owner is None:
            return
        if ready is not None and ready.done() and stop is not None:
            stop.set()
        else:
            owner.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(owner), CLOSE_LIMIT)
        except BaseException:
            pass
        if not owner.done():
            owner.cancel()
            self.kill_leftovers()

    async def _close(self) -> None:
        self._closing = True
        if self._reconnecting is not None and not self._reconnecting.done():
            self._reconnecting.cancel()
        await self._shutdown_owner()
        with self._lock:
            error = self.error if self.state == "failed" else None
        self._set("failed" if error else "closed", error)


async def _list_tools(session: Any) -> list[dict]:
    """Every page of tools/list, as wire JSON (camelCase keys)."""
    from mcp.types import PaginatedRequestParams

    specs: list[dict] = []
    cursor = None
    for _ in range(MAX_TOOL_PAGES):
        result = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        specs.extend(t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in result.tools)
        cursor = result.next_cursor
        if not cursor:
            break
    return specs


async def _has_resources(session: Any) -> bool:
    """Whether the server advertises resources and lists some, or some resource templates (first pages)."""
    caps = session.server_capabilities
    if caps is None or caps.resources is None:
        return False
    if (await session.list_resources()).resources:
        return True
    try:
        return bool((await session.list_resource_templates()).resource_templates)
    except Exception:  # templates are optional: a server without them may refuse the method
        return False


async def _list_prompts(session: Any) -> list[dict]:
    """Every page of prompts/list (wire JSON), when the server advertises prompts."""
    from mcp.types import PaginatedRequestParams

    caps = session.server_capabilities
    if caps is None or caps.prompts is None:
        return []
    prompts: list[dict] = []
    cursor = None
    for _ in range(MAX_TOOL_PAGES):
        result = await session.list_prompts(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        prompts.extend(p.model_dump(by_alias=True, mode="json", exclude_none=True) for p in result.prompts)
        cursor = result.next_cursor
        if not cursor or len(prompts) >= MAX_PROMPTS:
            break
    return prompts[:MAX_PROMPTS]


def _sandboxed(argv: list[str], mode: str, cwd: Path | None) -> list[str]:
    """A stdio server's command line, run through the sandbox helper when its entry opts in (``sandbox =
    "read-only"`` or ``"workspace-write"``: writable is its cwd; no network; see docs/security.md)."""
    if mode == "off":
        return argv

    return Sandbox(mode=mode).wrap(argv, os.path.realpath(cwd or os.getcwd()))
