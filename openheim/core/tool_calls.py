"""Running one reply's tool calls: argument check, permission, concurrent execution, capping."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from openheim.config.hooks import ALLOW, ASK, DENY  # not core.hooks: the runner loads only when hooks exist
from openheim.core.events import StreamEvent, ToolCall, ToolDenied, ToolResult
from openheim.core.final_decision import final_decision
from openheim.core.models import ImageBlock, Message, ToolUseBlock
from openheim.core.permission import PermissionRequest, needs_permission
from openheim.core.tool_images import split_result
from openheim.core.tools import ViewContext, parse_arguments
from openheim.errors import OpenheimError, file_error

if TYPE_CHECKING:
    from openheim.core.tools import ToolExecutor
    from openheim.core.turn_context import TurnContext

log = logging.getLogger(__name__)

RESULT_CAP = 128 * 1024
MAX_PARALLEL = 8  # tool calls of one reply that run at once (config: max_parallel_tools)
CANCELLED_BY_USER = "Cancelled by user."
BAD_ARGUMENTS = "Error: the arguments are not a valid JSON object, so the call was not run."
CUT_OFF_ADVICE = (
    " The reply hit the output token limit (max_tokens) while writing them; retry with smaller "
    "arguments, splitting the work across several calls."
)


@dataclass(eq=False)
class ToolOutcome:
    """One tool call's result text, whether it failed, and the images that go with it."""

    content: str
    is_error: bool
    images: list[ImageBlock] = field(default_factory=list)


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


def _permitted(
    executor: ToolExecutor, call: ToolUseBlock, ctx: TurnContext, hook_decision: str | None = None
) -> ToolOutcome | None:
    """None when the call may run, else the denial outcome. A pre_tool hook's "allow" skips the gate; its
    "ask" puts even a read-only call to the gate; final_decision has the last word either way."""
    gate = ctx.gate
    if gate is None or call.name not in executor.names():  # an unavailable tool fails without asking
        return None
    request = PermissionRequest(call.id, call.name, call.arguments)
    unasked = hook_decision != ASK and not needs_permission(gate, executor.capabilities(call.name))
    approved = hook_decision == ALLOW or unasked or gate.request(request, ctx.cancel).allowed
    refused = final_decision(gate, request, approved, ctx.cancel)
    if refused is None:
        return None
    _report_denial(call, ctx, refused.message, refused.source)
    return ToolOutcome(refused.message, True)


def _report_denial(call: ToolUseBlock, ctx: TurnContext, reason: str, source: dict[str, str]) -> None:
    """A ToolDenied event for the front end: who refused the call and what the model was told."""
    if ctx.emit is not None:
        ctx.emit(
            ToolDenied(call.id, call.name, source.get("by", "user"), reason, source.get("rule"), source.get("mode"))
        )


def _with_hooks(
    executor: ToolExecutor, call: ToolUseBlock, ctx: TurnContext
) -> tuple[ToolUseBlock, str | None, ToolOutcome | None]:
    """The pre_tool hooks' say: (the call as it runs, their decision, a refusal outcome or None)."""
    hooks = ctx.hooks
    if hooks is None or not hooks.has("pre_tool") or call.name not in executor.names():
        return call, None, None
    answer = hooks.pre_tool(call, parse_arguments(call.arguments) or {}, ctx.cancel)
    if answer.decision == DENY:
        return call, DENY, ToolOutcome(answer.reason, True)
    if answer.arguments is not None:
        call = replace(call, arguments=answer.arguments)
    return call, answer.decision, None


def _post_note(call: ToolUseBlock, outcome: ToolOutcome, ctx: TurnContext) -> ToolOutcome:
    """The post_tool hooks' notes appended to the result (a failed hook adds nothing)."""
    hooks = ctx.hooks
    if hooks is None or not hooks.has("post_tool"):
        return outcome
    note = hooks.post_tool(call, parse_arguments(call.arguments) or {}, outcome.content, outcome.is_error, ctx.cancel)
    return replace(outcome, content=f"{outcome.content}\n\n[hook] {note}") if note else outcome


def execute_one(executor: ToolExecutor, call: ToolUseBlock, ctx: TurnContext, cut_off: bool) -> ToolOutcome:
    """Check, hooks, ask, run, hooks: every failure becomes an error result the model reads."""
    if not arguments_usable(call.arguments):
        return ToolOutcome(BAD_ARGUMENTS + (CUT_OFF_ADVICE if cut_off else ""), True)
    try:
        call, decision, refused = _with_hooks(executor, call, ctx)
        if refused is not None:
            _report_denial(call, ctx, refused.content, {"by": "hook"})
            return refused
        denied = _permitted(executor, call, ctx, decision)
        if denied is not None:
            return denied
        if ctx.cancel.cancelled:
            return ToolOutcome(ctx.cancel.reason or CANCELLED_BY_USER, True)
        call_ctx = replace(ctx, tool_call_id=call.id)
        text, images = split_result(executor.execute(call.name, call.arguments, call_ctx))
        outcome = ToolOutcome(cap_result(text), False, images)
    except OpenheimError as e:
        outcome = ToolOutcome(cap_result(f"Error: {e}"), True)
    except OSError as e:  # a refused file operation a tool did not word itself: one sentence, not "[Errno 22]"
        outcome = ToolOutcome(cap_result(f"Error: {file_error(e)}"), True)
    except Exception as e:  # a buggy tool must not take the turn down
        log.exception("tool %s crashed", call.name)
        outcome = ToolOutcome(f"Error: {type(e).__name__}: {e}", True)
    return _post_note(call, outcome, ctx)


def _start_workers(
    executor: ToolExecutor,
    calls: list[ToolUseBlock],
    ctx: TurnContext,
    cut_off: bool,
    max_parallel: int,
    done: queue.Queue[tuple[int, ToolOutcome]],
) -> None:
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


def _announce(
    executor: ToolExecutor, calls: list[ToolUseBlock], ctx: TurnContext, on_event: Callable[[StreamEvent], None]
) -> None:
    """Each call is presented before any of them runs (a diff shows the file as it was), and every call is
    announced before any of them talks to the client."""
    where = ViewContext(ctx.effective_cwd, ctx.client_io, ctx.cancel, root=ctx.work_dir)
    if ctx.sync is not None:
        ctx.sync()
    for call in calls:
        view = executor.present(call.name, parse_arguments(call.arguments), where)
        on_event(ToolCall(call.id, call.name, call.arguments, view))
    if ctx.sync is not None:
        ctx.sync()


def run_tool_calls(
    executor: ToolExecutor,
    calls: list[ToolUseBlock],
    ctx: TurnContext,
    on_event: Callable[[StreamEvent], None],
    cut_off: bool = False,
    max_parallel: int = MAX_PARALLEL,
) -> FinishedCalls:
    """Run calls concurrently, at most ``max_parallel`` at once and the rest queued in call order;
    events in completion order, result messages in call order."""
    _announce(executor, calls, ctx, on_event)
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
    messages = [
        Message.tool_result(c.id, c.name, outcomes[i].content, outcomes[i].is_error, outcomes[i].images)
        for i, c in enumerate(calls)
    ]
    return FinishedCalls(messages, cancelled)
