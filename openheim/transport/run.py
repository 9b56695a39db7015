"""Headless `openheim run`: one prompt, the reply streamed to stdout, an exit code that means something."""
from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from openheim.core import events
from openheim.core.models import AgentResult, StopReason

if TYPE_CHECKING:
    from openheim.client import OpenheimClient, SessionHandle
    from openheim.core.events import StreamEvent
    from openheim.runtime.turn import Turn

SCHEMA_VERSION = 1
EXIT_CODES = {
    StopReason.END_TURN: 0,
    StopReason.NO_CONTENT: 0,
    StopReason.MAX_ITERATIONS: 3,
    StopReason.MAX_TOKENS: 4,
    StopReason.REFUSAL: 5,
    StopReason.CANCELLED: 130,
}


@dataclass
class RunOptions:
    prompt: str
    output: str = "text"  # text | json | stream-json
    verbose: bool = False
    approve: str = "all"  # all | reads | none
    cwd: Path | None = None
    session: str | None = None
    resume_latest: bool = False


def event_json(event: StreamEvent) -> dict:
    """A StreamEvent as a stream-json line: ``type`` is the event name."""
    data = event.to_dict()
    data["type"] = data.pop("event_type")
    data["schema_version"] = SCHEMA_VERSION
    return data


def result_json(result: AgentResult, handle: SessionHandle) -> dict:
    cfg = handle.config
    return {"text": result.final_response or "", "stop_reason": result.stop_reason.value,
            "iterations": result.iterations_used, "usage": result.usage.to_dict(), "session_id": handle.id,
            "model": cfg.model, "provider": cfg.provider_name}


def _dumps(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class Printer:
    """Turns events into output: reply text on stdout, activity on stderr."""

    def __init__(self, output: str, verbose: bool, out: TextIO, err: TextIO) -> None:
        self.output, self.verbose, self.out, self.err = output, verbose, out, err
        self.ends_with_newline = True

    def events(self, batch: list[StreamEvent]) -> None:
        """Write a batch of events, then flush once."""
        for event in batch:
            self.event(event)
        self.out.flush()

    def event(self, event: StreamEvent) -> None:
        if self.output == "stream-json":
            self.out.write(_dumps(event_json(event)) + "\n")
        elif isinstance(event, events.LlmResponse) and self.output == "text":
            self.out.write(event.content)
            if event.content:
                self.ends_with_newline = event.content.endswith("\n")
        if self.verbose:
            self._activity(event)

    def _activity(self, event: StreamEvent) -> None:
        if isinstance(event, events.ToolCall):
            self.err.write(f"⚙ {event.tool_name} {_preview(event.arguments)}\n")
        elif isinstance(event, events.ToolResult):
            mark = "✗" if event.is_error else "→"
            self.err.write(f"  {mark} {_preview(event.result)}\n")
        elif isinstance(event, events.ContextTrimmed):
            self.err.write(f"[{event.dropped} earlier messages left out to fit the context window]\n")
        else:
            return
        self.err.flush()

    def result(self, result: AgentResult, handle: SessionHandle) -> None:
        if self.output == "text":
            if not self.ends_with_newline:
                self.out.write("\n")
        elif self.output == "json":
            self.out.write(_dumps(result_json(result, handle)) + "\n")
        else:
            line = {"type": "result", "schema_version": SCHEMA_VERSION, **result_json(result, handle)}
            self.out.write(_dumps(line) + "\n")
        self.out.flush()
        notice = result.stop_reason.notice
        if notice:
            self.err.write(f"openheim: {notice}\n")

    def error(self, message: str) -> None:
        if self.output == "stream-json":
            self.out.write(_dumps({"type": "error", "schema_version": SCHEMA_VERSION, "message": message}) + "\n")
            self.out.flush()


def _preview(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def open_session(client: OpenheimClient, opts: RunOptions, cwd: Path) -> SessionHandle:
    from openheim.errors import InvalidArgument

    if opts.session:
        handle, _ = client.resume_session(opts.session, cwd)
        return handle
    if opts.resume_latest:
        metas = client.list_sessions(str(cwd))
        if not metas:
            raise InvalidArgument(f"no earlier session in {cwd} to continue; run without --continue to start one")
        handle, _ = client.resume_session(metas[0].id, cwd)
        return handle
    return client.new_session(cwd)


def run_prompt(client: OpenheimClient, opts: RunOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run one turn, printing its events on this thread as they arrive; returns the exit code."""
    from openheim.core.permission import PolicyGate

    cwd = (opts.cwd or Path(os.getcwd())).absolute()
    handle = open_session(client, opts, cwd)
    handle.permission_gate(PolicyGate(opts.approve, handle.tool_capabilities))
    printer = Printer(opts.output, opts.verbose, out, err)
    signals = _SignalGuard(handle)
    try:
        turn = handle.start_turn(opts.prompt)
        try:
            _print_events(turn, printer)
        except KeyboardInterrupt:
            turn.cancel()
            if not _print_after_cancel(turn, printer):
                return 130
    finally:
        signals.restore()
    if signals.received:
        return 128 + signals.received
    if turn.error is not None:
        printer.error(str(turn.error))
        raise turn.error
    printer.result(turn.result, handle)
    return EXIT_CODES[turn.result.stop_reason]


def _print_events(turn: Turn, printer: Printer) -> None:
    for batch in turn.batches():
        printer.events(batch)


def _print_after_cancel(turn: Turn, printer: Printer) -> bool:
    """After Ctrl-C: print what the winding-down turn still says; False when it did not end cleanly."""
    try:
        _print_events(turn, printer)
    except KeyboardInterrupt:
        return False
    finally:
        printer.out.flush()
    return turn.completed and turn.error is None


class _SignalGuard:
    """SIGTERM/SIGHUP: kill running tool process groups, cancel the turn, exit 128+signal."""

    def __init__(self, handle: SessionHandle) -> None:
        self.received = 0
        self._handle = handle
        self._old: dict[int, object] = {}
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        from openheim.tools.process import kill_all

        self.received = signum
        kill_all()
        self._handle.cancel()

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
