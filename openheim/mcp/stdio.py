"""The stdio transport for the SDK's ``ClientSession``, on the bridge loop: the server runs in a process group
of its own with a minimal environment; its stdout is read line by line within a size limit (an oversized
response becomes an error for the request it answers, a line that is not JSON-RPC a note in the server's
log); invalid tools are taken out of a tools/list result one by one; its stderr goes to a rotating log.
On exit: stdin is closed, then the group gets SIGTERM after 2 s and SIGKILL 2 s later."""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openheim.core.child_env import child_environ
from openheim.mcp.framing import LineReader, Oversized, refusal, usable_tools

if TYPE_CHECKING:
    from openheim.config.schema import McpServerConfig
    from openheim.mcp.server_log import ServerLog

log = logging.getLogger(__name__)

INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
EXIT_GRACE = 2.0  # seconds after stdin closes, then SIGTERM; as long again, then SIGKILL
_CHUNK = 1 << 16


def child_env(extra: dict[str, str]) -> dict[str, str]:
    """A minimal inherited environment (no provider keys) plus the server's own ``env``."""
    env = {k: v for k in INHERITED_ENV if (v := os.environ.get(k)) is not None and not v.startswith("()")}
    return child_environ(env, extra=extra)


@dataclass
class Link:
    """One connection's state, shared with the server that opened it."""

    name: str
    max_message: int
    pid: int | None = None
    closed: bool = False
    tool_lists: set = field(default_factory=set)  # ids of tools/list requests in flight


def tool_validator() -> Callable[[dict], str | None]:
    from mcp_types import Tool
    from pydantic import ValidationError

    def valid(tool: dict) -> str | None:
        try:
            Tool.model_validate(tool)
        except ValidationError as e:
            errors = e.errors()
            if not errors:
                return "its definition is invalid"
            where = ".".join(str(p) for p in errors[0]["loc"])
            return f"{where}: {errors[0]['msg']}" if where else str(errors[0]["msg"])
        return None

    return valid


def decode(line: bytes | Oversized, link: Link, server_log: ServerLog, valid: Callable[[dict], str | None]) -> Any:
    """A stdout line as a JSON-RPC message (a dict), or None to skip it. Raises EOFError for an oversized
    line whose request cannot be told (the connection is then given up)."""
    if isinstance(line, Oversized):
        limit = link.max_message
        log.warning(
            "MCP server '%s' sent a message of %d MiB, over the %d MiB limit; refused",
            link.name,
            line.size >> 20,
            limit >> 20,
        )
        if line.request_id is None:
            raise EOFError("an oversized message whose request is unknown")
        return refusal(line.request_id, line.size, limit, link.name)
    if not line.strip():
        return None
    try:
        message = json.loads(line)
    except ValueError:
        server_log.note(f"ignored a line on stdout that is not JSON: {line[:200]!r}")
        return None
    if not isinstance(message, dict):
        server_log.note(f"ignored a line on stdout that is not a JSON-RPC message: {line[:200]!r}")
        return None
    request_id = message.get("id")
    if request_id in link.tool_lists and "method" not in message:
        link.tool_lists.discard(request_id)
        if isinstance(message.get("result"), dict):
            message["result"] = usable_tools(
                message["result"], valid, lambda text: log.warning("MCP server '%s': %s", link.name, text)
            )
    return message


@asynccontextmanager
async def stdio_transport(
    cfg: McpServerConfig, argv: list[str], link: Link, server_log: ServerLog, sdk: Callable[[], Awaitable[None]]
) -> AsyncIterator[tuple]:
    """(read stream, write stream) of ``SessionMessage``s for ``ClientSession``; ``argv`` runs the server
    (its command line, possibly wrapped by the sandbox helper). The server is spawned before ``sdk`` (the
    SDK's import, which may still be under way) is awaited, so its start-up and our import overlap."""
    import anyio

    process = await anyio.open_process(
        argv, env=child_env(cfg.env), cwd=str(cfg.cwd) if cfg.cwd else None, start_new_session=True
    )
    link.pid = process.pid
    try:
        await sdk()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _stop(process)
        raise
    read_in, read_out = anyio.create_memory_object_stream[Any](0)
    write_in, write_out = anyio.create_memory_object_stream[Any](0)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_pump_stdout, process, link, server_log, read_in)
        tasks.start_soon(_pump_stdin, process, link, write_out, read_in)
        tasks.start_soon(_pump_stderr, process, server_log)
        try:
            yield read_out, write_in
        finally:
            with anyio.CancelScope(shield=True):
                await write_in.aclose()
                await read_out.aclose()
                await _stop(process)
            tasks.cancel_scope.cancel()


async def _pump_stdout(process: Any, link: Link, server_log: ServerLog, read_in: Any) -> None:
    """The server's stdout, line by line within the size limit, as SessionMessages into ``read_in``."""
    import anyio
    from mcp.shared.message import SessionMessage

    assert process.stdout is not None
    reader, valid = LineReader(link.max_message), tool_validator()
    try:
        async with read_in:
            while True:
                try:
                    chunk = await process.stdout.receive(_CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    return
                for line in reader.feed(chunk):
                    message = _parsed(decode(line, link, server_log, valid), server_log)
                    if message is not None:
                        await read_in.send(SessionMessage(message))
    except EOFError:
        return
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        return
    finally:
        link.closed = True


def _parsed(message: Any, server_log: ServerLog) -> Any:
    """A decoded stdout message as the SDK's JSON-RPC type, or None (noted in the server's log) when it is not one."""
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    if message is None:
        return None
    try:
        return jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        server_log.note(f"ignored a stdout message that is not JSON-RPC: {str(message)[:200]}")
        return None


async def _pump_stdin(process: Any, link: Link, write_out: Any, read_in: Any) -> None:
    """What the session sends, one line each, to the server's stdin (tools/list requests are noted, so their
    answers are checked tool by tool)."""
    import anyio

    assert process.stdin is not None
    try:
        async with write_out:
            async for item in write_out:
                message = item.message
                if getattr(message, "method", None) == "tools/list":
                    link.tool_lists.add(message.id)
                data = message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await process.stdin.send(data.encode())
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        link.closed = True
        await read_in.aclose()


async def _pump_stderr(process: Any, server_log: ServerLog) -> None:
    import anyio

    assert process.stderr is not None
    try:
        while True:
            server_log.write(await process.stderr.receive(_CHUNK))
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        return


async def _stop(process: Any) -> None:
    """stdin EOF, then SIGTERM and SIGKILL to the process group, each after a grace period."""
    import anyio

    try:
        await process.stdin.aclose()
    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    for sig in (signal.SIGTERM, signal.SIGKILL, None):
        with anyio.move_on_after(EXIT_GRACE):
            while process.returncode is None:
                await anyio.sleep(0.01)
        if process.returncode is not None or sig is None:
            break
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError, OSError):
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # what the server left behind in its group
    except (ProcessLookupError, PermissionError, OSError):
        pass
