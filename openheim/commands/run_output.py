"""What `openheim run` prints: the reply and activity as text, or JSON / stream-JSON objects for scripts."""

from __future__ import annotations

import json
import signal
import sys
from typing import TYPE_CHECKING, TextIO

from openheim.config.prices import dollars
from openheim.core import events
from openheim.core.control_chars import one_line, visible
from openheim.core.models import AgentResult, StopReason, Usage
from openheim.errors import error_kind, error_message, exit_code_for

if TYPE_CHECKING:
    from openheim.core.events import StreamEvent
    from openheim.runtime.session import Session

SCHEMA_VERSION = 1
EXIT_CODES = {
    StopReason.END_TURN: 0,
    StopReason.NO_CONTENT: 0,
    StopReason.MAX_ITERATIONS: 3,
    StopReason.MAX_TOKENS: 4,
    StopReason.REFUSAL: 5,
    StopReason.BUDGET: 6,
    StopReason.INVALID_OUTPUT: 7,
    StopReason.CANCELLED: 130,
}


def event_json(event: StreamEvent) -> dict:
    """A StreamEvent as a stream-json line: ``type`` is the event name."""
    data = event.to_dict()
    data["type"] = data.pop("event_type")
    data["schema_version"] = SCHEMA_VERSION
    return data


def result_json(
    result: AgentResult,
    handle: Session,
    structured: bool = False,
    streamed: str = "",
    denied: list[dict] | None = None,
) -> dict:
    """The run's result object; ``structured``: the run had an output schema (the key is always there).

    A reply cut short (cancelled, a budget) carries what had streamed (``streamed``, when the turn had no
    text of its own to give), ``error`` {message, kind} and ``exit_code``, as a failure does."""
    cfg = handle.config
    cut = _cut_short(result)
    text = result.final_response or (streamed if cut is not None else "")
    out: dict[str, object] = {
        "text": text,
        "stop_reason": result.stop_reason.value,
        "iterations": result.iterations_used,
        "usage": result.usage.to_dict(),
        "session_id": handle.id,
        "model": cfg.model,
        "provider": cfg.provider_name,
        "denied": list(denied or []),
    }
    if result.budget is not None:
        out["budget"] = result.budget.to_dict()
    if structured:
        out["structured"] = result.structured
    if result.output_error is not None:
        out["output_error"] = result.output_error
    if result.cost is not None:
        out["cost"] = round(result.cost, 6)
    if cut is not None:
        out["error"], out["exit_code"] = cut, EXIT_CODES[result.stop_reason]
    return out


def _cut_short(result: AgentResult) -> dict | None:
    """The ``error`` of a reply that was stopped before it ended (None: it ended on its own)."""
    if result.stop_reason is StopReason.CANCELLED:
        return {"message": "interrupted (cancelled)", "kind": "interrupted"}
    if result.stop_reason is StopReason.BUDGET:
        notice = result.budget.notice if result.budget is not None else result.stop_reason.notice
        return {"message": notice, "kind": "budget"}
    return None


def failure_json(error: BaseException, known: dict | None = None) -> dict:
    """A failed run for scripts: ``error`` {message, kind}, ``exit_code``, and whatever else is known."""

    if isinstance(error, Interrupted):
        message, kind, code = str(error), "interrupted", 128 + error.signum
    else:
        message, kind, code = error_message(error), error_kind(error), exit_code_for(error)
    return {"error": {"message": message, "kind": kind}, "exit_code": code, **(known or {})}


def print_failure(output: str, error: BaseException, out: TextIO | None = None, known: dict | None = None) -> None:
    """``--output json``: the failure object; ``stream-json``: the same as a last ``error`` line; text: nothing
    (the one-line message goes to stderr, printed by the CLI)."""
    if output == "text":
        return
    obj = failure_json(error, known)
    if output == "stream-json":
        # ``message`` stays where schema_version 1 put it; ``error`` carries the same with its kind
        obj = {"type": "error", "schema_version": SCHEMA_VERSION, "message": obj["error"]["message"], **obj}
    out = out or sys.stdout
    out.write(_dumps(obj) + "\n")
    out.flush()


def _dumps(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class Interrupted(Exception):
    """The run was stopped by a signal before it had a result (reported, never raised)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


class Printer:
    """Turns events into output: reply text on stdout, activity on stderr."""

    def __init__(self, output: str, verbose: bool, out: TextIO, err: TextIO, structured: bool = False) -> None:
        self.output, self.verbose, self.out, self.err = output, verbose, out, err
        self.structured = structured  # an output schema: text mode prints only the validated JSON, at the end
        self.ends_with_newline = True
        self.known: dict = {}  # session_id, model, provider once the session is open
        self.usage: Usage | None = None  # what the turn reported so far
        self.streamed: list[str] = []  # the reply text of the running model call so far
        self.denied: list[dict] = []  # the tool calls the permission gate refused
        self.terminal = _isatty(out)  # the model's reply reaches a terminal: control characters are filtered

    def events(self, batch: list[StreamEvent]) -> None:
        """Write a batch of events, then flush once."""
        for event in batch:
            self.event(event)
        self.out.flush()

    def event(self, event: StreamEvent) -> None:
        if isinstance(event, events.LlmResponse):  # most events of a stream: a fragment of the reply's text
            self.streamed.append(event.content)
            if self.output == "stream-json":
                self.out.write(_dumps(event_json(event)) + "\n")
            elif self.output == "text" and not self.structured and event.content:
                self.out.write(visible(event.content) if self.terminal else event.content)
                self.ends_with_newline = event.content.endswith("\n")
            return  # it carries no usage, and verbose activity shows none of it
        used = events.usage_of(event)
        if used is not None:
            self.usage = used if self.usage is None else self.usage + used
        if isinstance(event, events.IterationStart):
            self.streamed = []
        elif isinstance(event, events.ToolDenied):
            self.denied.append(denied_json(event))
        elif isinstance(event, events.Notice):  # one stderr line in every output mode (stream-json: also a line)
            self.err.write(f"openheim: {_preview(event.text, 400)}\n")
            self.err.flush()
        if self.output == "stream-json":
            self.out.write(_dumps(event_json(event)) + "\n")
        if self.verbose:
            self._activity(event)

    def _activity(self, event: StreamEvent) -> None:
        if isinstance(event, events.SubagentEvent):
            inner = event.event
            if isinstance(inner, events.UsageReport):
                return
            if isinstance(inner, events.ToolCall):
                self.err.write(
                    f"  ⚙ [{_preview(event.subagent)}] {_preview(inner.tool_name)} {_preview(inner.arguments)}\n"
                )
            else:
                mark = "✗" if inner.is_error else "→"
                self.err.write(f"    {mark} {_preview(inner.result)}\n")
        elif isinstance(event, events.ToolCall):
            self.err.write(f"⚙ {_preview(event.tool_name)} {_preview(event.arguments)}\n")
        elif isinstance(event, events.ToolResult):
            mark = "✗" if event.is_error else "→"
            self.err.write(f"  {mark} {_preview(event.result)}\n")
        elif isinstance(event, events.ContextTrimmed):
            self.err.write(f"[{event.dropped} earlier messages left out to fit the context window]\n")
        elif isinstance(event, events.Compaction):
            self.err.write(f"[{compaction_line(event)}]\n")
        else:
            return
        self.err.flush()

    def result(self, result: AgentResult, handle: Session) -> None:
        if self.output == "text":
            if self.structured and result.stop_reason is StopReason.END_TURN:
                self.out.write(json.dumps(result.structured, ensure_ascii=False) + "\n")
            elif not self.ends_with_newline:
                self.out.write("\n")
        elif self.output == "json":
            self.out.write(_dumps(self._result_json(result, handle)) + "\n")
        else:
            line = {"type": "result", "schema_version": SCHEMA_VERSION, **self._result_json(result, handle)}
            self.out.write(_dumps(line) + "\n")
        self.out.flush()
        notice = _notice(result)
        if notice:
            self.err.write(f"openheim: {notice}\n")
        if self.verbose and result.cost is not None:
            self.err.write(f"openheim: this turn cost {dollars(result.cost)}\n")

    def _result_json(self, result: AgentResult, handle: Session) -> dict:
        return result_json(result, handle, self.structured, "".join(self.streamed), self.denied)

    def failure(self, error: BaseException) -> None:
        known = dict(self.known)
        if self.usage is not None:
            known["usage"] = self.usage.to_dict()
        if self.streamed and "text" not in known:  # a reply that broke off: what had arrived
            known["text"] = "".join(self.streamed)
        print_failure(self.output, error, self.out, known)

    def interrupted(self, signum: int, result: AgentResult | None = None, handle: Session | None = None) -> int:
        """A run stopped by ``signum``: its result when the turn wound down in time (with the signal as its
        ``error``), else a failure object with what had streamed; returns the exit code."""
        code = 128 + signum
        if result is None or handle is None:
            self.failure(Interrupted(signum))
            return code
        if self.output == "text":
            if not self.ends_with_newline:
                self.out.write("\n")
        else:
            obj = {
                **self._result_json(result, handle),
                "exit_code": code,
                "error": {"message": str(Interrupted(signum)), "kind": "interrupted"},
            }
            if self.output == "stream-json":
                obj = {"type": "result", "schema_version": SCHEMA_VERSION, **obj}
            self.out.write(_dumps(obj) + "\n")
        self.out.flush()
        return code


def denied_json(event: events.ToolDenied) -> dict:
    """A refused call in the result's ``denied`` list: the tool, who refused it (rule or mode) and why."""
    out = event.to_dict()
    del out["event_type"]
    return out


def _notice(result: AgentResult) -> str | None:
    """The one stderr line a result needs, if any."""
    if result.budget is not None:
        return result.budget.notice
    if result.output_error is not None:
        return f"{result.output_error} (after one repair round; see --output-schema)"
    return result.stop_reason.notice


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _preview(text: str, limit: int = 200) -> str:
    """One line of at most ``limit`` characters, without terminal control sequences (as the chat shows it)."""
    flat = one_line(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def compaction_line(event: events.Compaction) -> str:
    """One line saying a compaction happened (or why it could not)."""
    if event.error is not None:
        return f"the conversation was not compacted: {event.error}"
    return (
        f"conversation compacted: {event.keep_from} earlier messages summarised by {event.model or 'the model'}"
        f" ({len(event.summary)} characters); the full record stays in the session log"
    )
