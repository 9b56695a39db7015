"""How an MCP server's failures are told apart and put in words: the errors the SDK raises (wrapped in
anyio's exception groups), whether the connection is gone, and the one-line reason a connect failed."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from openheim.errors import Cancelled, ToolExecutionError
from openheim.mcp.oauth import needs_login_message, wants_login

if TYPE_CHECKING:
    from openheim.core.turn_context import CancelToken

CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
T = TypeVar("T")


class CallFailed(Exception):
    """A call failed for a reason already put in words for the model."""


def leaf_error(error: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, which anyio wraps errors in."""
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


def connect_failure(
    name: str, url: str | None, phase: str, error: BaseException, *, unauthorized: bool, log_file: str, limit: float
) -> str:
    """Why server ``name`` could not connect, in one line. ``phase``: spawn, connect or list; ``unauthorized``:
    an HTTP answer asked for a bearer token; ``limit``: the seconds it had. Secrets in ``error`` are the
    caller's to scrub."""
    leaf = leaf_error(error)
    if isinstance(leaf, CallFailed):  # already in words (the SDK is missing)
        return str(leaf)
    if isinstance(leaf, TimeoutError):
        return f"MCP server '{name}' did not start within {int(limit)}s"
    reason = describe(leaf)
    if url and (wants_login(error) or unauthorized):
        return f"MCP server '{name}' {needs_login_message(name)}"
    if phase == "spawn":
        return f"MCP spawn '{name}' failed: {reason}"
    if phase == "list":
        return f"MCP list_tools failed for '{name}': {reason}"
    if url:
        return f"MCP HTTP connect to '{name}' failed: {reason}"
    return f"MCP stdio connect to '{name}' failed: {reason} (its stderr is in {log_file})"


def answer(
    future: concurrent.futures.Future[T],
    limit: float,
    cancel: CancelToken | None,
    *,
    late: str,
    cancelled: str,
    failed: str,
    scrub: Callable[[str], str],
) -> T:
    """The bridge's answer within ``limit`` seconds; a cancel cancels it. Failures become one-line
    errors: ``late`` past the deadline, ``cancelled``, or ``failed: <why>`` (passed through ``scrub``)."""
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
        raise ToolExecutionError(f"{failed}: {scrub(describe(e))}") from None
    finally:
        remove()
