"""Running one reply's tool calls: argument check, permission, concurrent execution, capping."""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from openheim.core.events import StreamEvent, ToolCall, ToolDenied, ToolResult
from openheim.core.models import Message, ToolUseBlock
from openheim.core.permission import PermissionRequest, denial_source, needs_permission
from openheim.core.tools import ViewContext, parse_arguments
from openheim.errors import OpenheimError

if TYPE_CHECKING:
    from openheim.core.tools import ToolExecutor
    from openheim.core.turn_context import TurnContext

log = logging.getLogger(__name__)

RESULT_CAP = 128 * 1024
MAX_PARALLEL = 8  # tool calls of one reply that run at once (config: max_parallel_tools)
CANCELLED_BY_USER = "Cancelled by user."
BAD_ARGUMENTS = "Error: the arguments are not a valid JSON object, so the call was not run."
CUT_OFF_ADVICE = (" The reply hit the output token limit (max_tokens) while writing them; retry with smaller "
                  "arguments, splitting the work across several calls.")


@dataclass(eq=False)
class ToolOutcome:
    """One tool call's result text and whether it failed."""

    content: str
    is_error: bool


@dataclass(eq=False)
class FinishedCalls:
    """The tool-result messages of a batch of calls; ``cancelled`` if the turn was."""

    messages: list[Message]
    cancelled: bool


def cap_result(text: str, cap: int = RESULT_CAP) -> str:
    """Cut at a UTF-8 boundary and say how much was kept."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= cap:
        return text
    kept = raw[:cap].decode("utf-8", "ignore")
    kept_bytes = len(kept.encode("utf-8"))
    return f"{kept}\n[tool output truncated: showing the first {kept_bytes} of {len(raw)} bytes]"


def arguments_usable(arguments: str) -> bool:
    """Blank or a JSON object: anything else is not run."""
    return parse_arguments(arguments) is not None


def _permitted(executor: ToolExecutor, call: ToolUseBlock, ctx: TurnContext) -> ToolOutcome | None:
    """None when the call may run, else the denial outcome."""
    gate = ctx.gate
    if gate is None or call.name not in executor.names():  # an unavailable tool fails without asking
        return None
    if not needs_permission(gate, executor.capabilities(call.name)):
        return None
    request = PermissionRequest(call.id, call.name, call.arguments)
    if gate.request(request, ctx.cancel).allowed:
        return None
    reason = gate.denial_message(request)
    if ctx.emit is not None:
        source = denial_source(gate, request)
        ctx.emit(ToolDenied(call.id, call.name, source.get("by", "user"), reason, source.get("rule"),
                            source.get("mode")))
    return ToolOutcome(reason, True)


def execute_one(executor: ToolExecutor, call: ToolUseBlock, ctx: TurnContext, cut_off: bool) -> ToolOutcome:
    """Check, ask, run: every failure becomes an error result the model reads."""
    if not arguments_usable(call.arguments):
        return ToolOutcome(BAD_ARGUMENTS + (CUT_OFF_ADVICE if cut_off else ""), True)
    try:
        denied = _permitted(executor, call, ctx)
        if denied is not None:
            return denied
        if ctx.cancel.cancelled:
            return ToolOutcome(ctx.cancel.reason or CANCELLED_BY_USER, True)
        call_ctx = replace(ctx, tool_call_id=call.id)
        return ToolOutcome(cap_result(executor.execute(call.name, call.arguments, call_ctx)), False)
    except OpenheimError as e:
        return ToolOutcome(cap_result(f"Error: {e}"), True)
    except Exception as e:  # a buggy tool must not take the turn down
        log.exception("tool %s crashed", call.name)
        return ToolOutcome(f"Error: {type(e).__name__}: {e}", True)


def _start_workers(executor: ToolExecutor, calls: list[ToolUseBlock], ctx: TurnContext, cut_off: bool,
                   max_parallel: int, done: queue.Queue[tuple[int, ToolOutcome]]) -> None:
    """At most ``max_parallel`` threads take the calls in order; none is started once the turn is cancelled."""
    pending = iter(enumerate(calls))
    lock = threading.Lock()

    def work() -> None:
        while not ctx.cancel.cancelled:
            with lock:
                index, call = next(pending, (-1, None))
            if call is None:
                return
            threading.current_thread().name = f"tool-{call.name}"
            done.put((index, execute_one(executor, call, ctx, cut_off)))

    for _ in range(min(max(1, max_parallel), len(calls))):
        threading.Thread(target=work, name="tool", daemon=True).start()


def run_tool_calls(executor: ToolExecutor, calls: list[ToolUseBlock], ctx: TurnContext,
                   on_event: Callable[[StreamEvent], None], cut_off: bool = False,
                   max_parallel: int = MAX_PARALLEL) -> FinishedCalls:
    """Run calls concurrently, at most ``max_parallel`` at once and the rest queued in call order;
    events in completion order, result messages in call order."""
    where = ViewContext(ctx.effective_cwd, ctx.client_io, ctx.cancel, root=ctx.work_dir)
    if ctx.sync is not None:
        ctx.sync()
    for call in calls:  # each call is presented before any of them runs: a diff shows the file as it was
        view = executor.present(call.name, parse_arguments(call.arguments), where)
        on_event(ToolCall(call.id, call.name, call.arguments, view))
    if ctx.sync is not None:
        ctx.sync()  # every call is announced before any of them talks to the client
    done: queue.Queue[tuple[int, ToolOutcome]] = queue.Queue()
    _start_workers(executor, calls, ctx, cut_off, max_parallel, done)
    outcomes: dict[int, ToolOutcome] = {}
    wake = ctx.cancel.on_cancel(lambda: done.put((-1, ToolOutcome("", True))))
    try:
        while len(outcomes) < len(calls) and not ctx.cancel.cancelled:
            index, outcome = done.get()
            if index < 0:
                break
            outcomes[index] = outcome
            on_event(ToolResult(calls[index].id, calls[index].name, outcome.content, outcome.is_error))
    finally:
        wake()
    cancelled = ctx.cancel.cancelled
    for index, call in enumerate(calls):
        if index not in outcomes:
            outcomes[index] = ToolOutcome(ctx.cancel.reason or CANCELLED_BY_USER, True)
            on_event(ToolResult(call.id, call.name, outcomes[index].content, True))
    messages = [Message.tool_result(c.id, c.name, outcomes[i].content, outcomes[i].is_error)
                for i, c in enumerate(calls)]
    return FinishedCalls(messages, cancelled)
