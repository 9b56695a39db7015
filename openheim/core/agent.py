"""The agent loop: fit → build → stream → run tools → repeat, until the model stops."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from openheim.core import events
from openheim.core.context import ContextFitter, turn_too_large
from openheim.core.events import StreamEvent
from openheim.core.llm.base import Chunk
from openheim.core.models import (
    AgentResult,
    Budget,
    Choice,
    FinishReason,
    Message,
    StopReason,
    TextBlock,
    Usage,
)
from openheim.core.tool_calls import run_tool_calls
from openheim.errors import Cancelled, ContextOverflow, OpenheimError, describe

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.core.context import FitResult
    from openheim.core.llm.base import LlmClient
    from openheim.core.models import Tool
    from openheim.core.spend import Spend
    from openheim.core.structured import OutputSchema
    from openheim.core.tools import ToolExecutor
    from openheim.core.turn_context import CancelToken, TurnContext

log = logging.getLogger(__name__)

OnEvent = Callable[[StreamEvent], None]
NO_RESULT = "No result: the turn was interrupted before this tool call finished."
NO_REPLY = "(No reply: this turn ended before the model answered.)"
INTERRUPTED_MARK = "\n\n[Reply interrupted: {why}. The text above is what had been streamed.]"
TOKEN_BUDGET_SKIP = "Not run: the turn's token budget ({limit} tokens) was reached before this call could run."


class Compacting(Protocol):
    """Replaces old history with a summary when a request would grow too big (conversation/compaction.py)."""

    def request(
        self,
        history: list[Message],
        system: Message | None,
        tools: Sequence[Tool],
        bytes_per_token: float,
        cancel: CancelToken,
        on_event: OnEvent,
    ) -> tuple[list[Message], Usage | None]: ...


@dataclass(eq=False)
class _TurnState:
    """What one turn accumulates across iterations."""

    usage: Usage = field(default_factory=Usage)
    last_usage: Usage | None = None
    streamed: list[str] = field(default_factory=list)  # the reply text of the running model call so far
    last_dropped: int = 0
    repaired: bool = False  # the one repair round of a structured answer was used
    compactor: Compacting | None = None
    spend: Spend | None = None  # the turn's dollar meter (shared with its subagents)


def run_turn(
    llm: LlmClient,
    executor: ToolExecutor,
    cfg: AgentConfig,
    history: list[Message],
    ctx: TurnContext,
    on_event: OnEvent,
    system: Message | None = None,
    fitter: ContextFitter | None = None,
    output: OutputSchema | None = None,
    compactor: Compacting | None = None,
) -> AgentResult:
    """Run one user turn to a stop reason; appends every new message to ``history``. With ``output``, the
    final answer must be JSON valid against it (one repair round, then stop reason INVALID_OUTPUT). With
    ``compactor``, old history may be replaced by a summary before a request (the summary call counts in usage)."""
    native = output is not None and getattr(llm, "native_output", False)
    if output is not None and not native:
        system = _with_instructions(system, output)
    extra: dict[str, Any] = {"output": output} if native else {}
    if ctx.session_id and getattr(llm, "session_cache", False):
        extra["session_id"] = ctx.session_id
    state = _TurnState(spend=ctx.spend, compactor=compactor)
    loop = _Loop(llm, executor, cfg, history, ctx, on_event, system, fitter or ContextFitter(cfg.context_window))
    loop.output, loop.state, loop.extra = output, state, extra
    for iteration in range(1, cfg.max_iterations + 1):
        result = loop.iterate(iteration)
        if result is not None:
            return result
    return _finish(on_event, state, None, cfg.max_iterations, StopReason.MAX_ITERATIONS)


@dataclass
class _Loop:
    """One turn's agent loop: each iteration asks the model, then runs its tool calls or settles its answer."""

    llm: LlmClient
    executor: ToolExecutor
    cfg: AgentConfig
    history: list[Message]
    ctx: TurnContext
    on_event: OnEvent
    system: Message | None
    fitter: ContextFitter
    output: OutputSchema | None = None
    state: _TurnState = field(default_factory=lambda: _TurnState())
    extra: dict[str, Any] = field(default_factory=dict)

    def iterate(self, iteration: int) -> AgentResult | None:
        """One model call and what follows it; None: go on with the next iteration."""
        ctx, on_event, state = self.ctx, self.on_event, self.state
        if ctx.cancel.cancelled:
            return _finish(on_event, state, None, iteration - 1, StopReason.CANCELLED)
        spent = _token_budget_reached(self.cfg, ctx) or _cost_budget_reached(self.cfg, ctx.spend)
        if spent is not None:  # subagents may have used it up meanwhile
            return _finish(on_event, state, None, iteration - 1, StopReason.BUDGET, spent)
        on_event(events.IterationStart(iteration))
        tools = self.executor.definitions()  # each request: a session's MCP tools change as its servers come up
        try:
            choice = _call_model(
                self.llm, self.fitter, self.history, self.system, tools, ctx, on_event, state, self.extra
            )
        except Cancelled:
            partial = _keep_interrupted(self.history, state, ctx.cancel.reason, on_event)
            return _finish(on_event, state, partial, iteration, StopReason.CANCELLED)
        except OpenheimError as e:  # the stream broke off (a timeout, a dropped connection): keep what came
            _keep_interrupted(self.history, state, f"the stream failed: {describe(e)}", on_event)
            raise
        _append(self.history, choice.message, on_event)
        self._count(choice)
        return self._after_reply(choice, iteration)

    def _count(self, choice: Choice) -> None:
        if choice.usage is not None:
            self.state.usage = self.state.usage + choice.usage
            self.state.last_usage = choice.usage
            self.ctx.usage.add(choice.usage)
            cost = self.ctx.spend.add(self.cfg, choice.usage)
            self.on_event(events.UsageReport(choice.usage, cost, self.ctx.spend.total if cost is not None else None))
            notice = self.ctx.spend.estimate_notice(choice.usage)
            if notice is not None:
                self.on_event(events.Notice(notice, "warning"))

    def _after_reply(self, choice: Choice, iteration: int) -> AgentResult | None:
        """Over budget, the reply's tool calls, a paused reply, or the answer."""
        calls = choice.message.tool_calls()
        over = _token_budget_reached(self.cfg, self.ctx) or _cost_budget_reached(self.cfg, self.ctx.spend)
        if over is not None and (calls or choice.finish_reason == FinishReason.PAUSED):
            for call in calls:  # the reply's calls get a result, so the history has no dangling call
                skipped = TOKEN_BUDGET_SKIP.format(limit=over.limit)
                _append(self.history, Message.tool_result(call.id, call.name, skipped, True), self.on_event)
            return _finish(self.on_event, self.state, None, iteration, StopReason.BUDGET, over)
        if calls:
            cut_off = choice.finish_reason == FinishReason.MAX_TOKENS
            finished = run_tool_calls(
                self.executor, calls, self.ctx, self.on_event, cut_off=cut_off, max_parallel=self.cfg.max_parallel_tools
            )
            for message in finished.messages:
                _append(self.history, message, self.on_event)
            if finished.cancelled:
                return _finish(self.on_event, self.state, None, iteration, StopReason.CANCELLED)
            return None
        if choice.finish_reason == FinishReason.PAUSED:
            return None
        return self._answer(choice, iteration)

    def _answer(self, choice: Choice, iteration: int) -> AgentResult | None:
        """The final answer; with an output schema, checked (one repair round, then INVALID_OUTPUT)."""
        on_event, state, output = self.on_event, self.state, self.output
        text = choice.message.text()
        reason = _stop_reason(choice, text)
        if output is None or reason not in (StopReason.END_TURN, StopReason.NO_CONTENT):
            return _finish(on_event, state, text, iteration, reason)
        structured, error = output.check(text or "")
        if error is None:
            return _finish(on_event, state, text, iteration, StopReason.END_TURN, structured=structured)
        if state.repaired:
            return _finish(on_event, state, text, iteration, StopReason.INVALID_OUTPUT, output_error=error)
        state.repaired = True
        _append(self.history, Message.user(output.repair_prompt(error)), on_event)
        return None


def _token_budget_reached(cfg: AgentConfig, ctx: TurnContext) -> Budget | None:
    """The token budget, once the turn's calls (input + output, cache traffic included; its subagents'
    too) have used it up."""
    limit = cfg.max_tokens_total
    used = ctx.usage.total.total
    if limit is None or used < limit:
        return None
    return Budget("tokens", limit, used)


def _cost_budget_reached(cfg: AgentConfig, spend: Spend) -> Budget | None:
    """The dollar budget, once the turn's calls (its subagents' included) have spent it."""
    limit = cfg.max_cost
    if limit is None or spend.turn < limit:
        return None
    return Budget("cost", limit, spend.turn)


def _stop_reason(choice: Choice, text: str | None) -> StopReason:
    if choice.finish_reason == FinishReason.MAX_TOKENS:
        return StopReason.MAX_TOKENS
    if choice.finish_reason == FinishReason.REFUSAL:
        return StopReason.REFUSAL
    if not text:
        return StopReason.NO_CONTENT
    return StopReason.END_TURN


def _with_instructions(system: Message | None, output: OutputSchema) -> Message:
    """The system prompt plus the output schema, for wires with no native structured-output mode."""
    base = system.text() if system is not None else None
    return Message.system(f"{base}\n\n{output.instructions()}" if base else output.instructions())


def _call_model(
    llm: LlmClient,
    fitter: ContextFitter,
    history: list[Message],
    system: Message | None,
    tools: list,
    ctx: TurnContext,
    on_event: OnEvent,
    state: _TurnState,
    extra: dict,
) -> Choice:
    """Fit, send and stream one model call; shrinks and resends on a context overflow."""
    fitter.reset_call()
    state.streamed = []
    request = _request(history, system, tools, fitter, ctx, on_event, state)

    def on_chunk(chunk: Chunk) -> None:
        if chunk.kind == "text":
            state.streamed.append(chunk.text)
            on_event(events.LlmResponse(chunk.text))
        else:
            on_event(events.ThinkingContent(chunk.text))

    while True:
        fit = fitter.fit(request, system, tools)
        _report_trim(fit, on_event, state)
        try:
            choice = llm.stream(fit.messages, tools, on_chunk, ctx.cancel, **extra)
        except ContextOverflow as e:
            if ctx.cancel.cancelled:
                raise Cancelled() from None
            if fitter.on_overflow(fit):
                log.info("context overflow at %d bytes; trimming and resending", fit.sent_bytes)
                continue
            raise turn_too_large(f"provider said: {e.message}") from None
        if ctx.cancel.cancelled:
            raise Cancelled()
        if choice.usage is not None:
            fitter.calibrate(fit.sent_bytes, choice.usage)
        return choice


def _request(
    history: list[Message],
    system: Message | None,
    tools: list,
    fitter: ContextFitter,
    ctx: TurnContext,
    on_event: OnEvent,
    state: _TurnState,
) -> list[Message]:
    """The messages to send: compacted first when the compactor says so (its summary call counts in usage)."""
    if state.compactor is None:
        return repair_missing_results(history)
    seen, summary_usage = state.compactor.request(history, system, tools, fitter.bytes_per_token, ctx.cancel, on_event)
    if summary_usage is not None:
        state.usage = state.usage + summary_usage
        ctx.usage.add(summary_usage)  # the turn's token budget and reported usage include the summary call
    return repair_missing_results(seen)


def _keep_interrupted(history: list[Message], state: _TurnState, reason: str | None, on_event: OnEvent) -> str | None:
    """A reply cut off by a cancel (the user, a signal, a time budget) or a broken stream: what had been
    streamed joins the conversation, marked as interrupted, so it is shown on reload and the model sees what
    it had said. ``reason``: the cancel token's (None: the user) or the failure's."""
    partial = "".join(state.streamed)
    if not partial.strip():
        return None
    why = _interruption(reason)
    _append(history, Message("assistant", [TextBlock(partial), TextBlock(INTERRUPTED_MARK.format(why=why))]), on_event)
    return partial


def _interruption(reason: str | None) -> str:
    """Why a reply was cut off, in a few words, from the cancel token's reason (None: the user)."""
    if not reason:
        return "stopped by the user"
    return reason.removeprefix("Cancelled: ").rstrip(".")


def _report_trim(fit: FitResult, on_event: OnEvent, state: _TurnState) -> None:
    if fit.dropped > 0 and fit.dropped != state.last_dropped:
        on_event(events.ContextTrimmed(fit.dropped))
    state.last_dropped = fit.dropped


def _append(history: list[Message], message: Message, on_event: OnEvent) -> None:
    history.append(message)
    on_event(events.MessageAppended(message))


def _finish(
    on_event: OnEvent,
    state: _TurnState,
    text: str | None,
    iterations: int,
    reason: StopReason,
    budget: Budget | None = None,
    structured: object = None,
    output_error: str | None = None,
) -> AgentResult:
    on_event(events.Finished(text, iterations))
    cost = state.spend.turn if state.spend is not None and state.spend.priced else None
    return AgentResult(text, iterations, reason, state.usage, state.last_usage, budget, structured, output_error, cost)


def repair_missing_results(history: list[Message]) -> list[Message]:
    """A request copy in which every tool call has a result (interrupted calls get an error result) and every
    prompt a reply: a turn that failed, was cancelled or was killed before the model answered leaves its prompt
    in the log, and the next prompt must not follow it directly (two user messages in a row)."""
    out: list[Message] = []
    i = 0
    while i < len(history):
        message = history[i]
        out.append(message)
        i += 1
        if message.role == "user" and i < len(history) and history[i].role == "user":
            out.append(Message.assistant(NO_REPLY))
            continue
        calls = message.tool_calls() if message.role == "assistant" else []
        if not calls:
            continue
        answered: set[str] = set()
        while i < len(history) and history[i].role == "tool":
            block = history[i].tool_result_block()
            if block is not None:
                answered.add(block.tool_call_id)
            out.append(history[i])
            i += 1
        out.extend(Message.tool_result(c.id, c.name, NO_RESULT, True) for c in calls if c.id not in answered)
    return out
