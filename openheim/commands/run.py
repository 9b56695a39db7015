"""Headless `openheim run`: one prompt, the reply streamed to stdout, an exit code that means something."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

import click

from openheim.commands.sandbox import chosen, sandbox_options
from openheim.core import events
from openheim.core.models import AgentResult, StopReason, TextBlock, Usage
from openheim.core.signals import SignalRoute, ignore
from openheim.errors import EXIT_CODE_HELP

if TYPE_CHECKING:
    from openheim.client import OpenheimClient
    from openheim.core.events import StreamEvent
    from openheim.core.models import ContentBlock, ImageBlock
    from openheim.core.structured import OutputSchema
    from openheim.runtime.session import Session
    from openheim.runtime.turn import Turn

SCHEMA_VERSION = 1
DOUBLE_INTERRUPT = 0.25  # seconds within which a second SIGINT is the same key press
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


@dataclass(eq=False)
class RunOptions:
    """The options of one ``openheim run``."""

    prompt: str
    output: str = "text"  # text | json | stream-json
    verbose: bool = False
    approve: str = "all"  # all | reads | none
    cwd: Path | None = None
    session: str | None = None
    resume_latest: bool = False
    output_schema: OutputSchema | None = None  # the final answer must be JSON valid against it
    fail_on_deny: bool = False  # exit DENIED when the permission gate refused any tool call
    images: list[ImageBlock] = field(default_factory=list)  # -i FILE: images sent after the prompt
    fork: bool = False  # run on a copy of the resumed session (history copied, checkpoints shared)


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
    from openheim.errors import error_kind, error_message, exit_code_for

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
                self.out.write(event.content)
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
            from openheim.config.prices import dollars

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


def _preview(text: str, limit: int = 200) -> str:
    """One line of at most ``limit`` characters, without terminal control sequences (as the chat shows it)."""
    from openheim.core.control_chars import one_line

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


def open_session(client: OpenheimClient, opts: RunOptions, cwd: Path) -> Session:
    from openheim.errors import InvalidArgument

    session_id = opts.session
    if opts.resume_latest:
        metas = client.list_sessions(str(cwd))
        if not metas:
            raise InvalidArgument(f"no earlier session in {cwd} to continue; run without --continue to start one")
        session_id = metas[0].id
    if session_id:
        handle, _ = client.resume_session(session_id, cwd)
        if opts.fork:
            fork = handle.fork()
            handle.close()
            return fork
        return handle
    return client.new_session(cwd)


def run_prompt(client: OpenheimClient, opts: RunOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run one turn, printing its events on this thread as they arrive; returns the exit code."""
    from openheim.core.permission import PolicyGate

    cwd = (opts.cwd or Path(os.getcwd())).absolute()
    printer = Printer(opts.output, opts.verbose, out, err, opts.output_schema is not None)
    try:
        handle = open_session(client, opts, cwd)
        handle.permission_gate(PolicyGate(opts.approve, handle.tool_capabilities))
        printer.known = {"session_id": handle.id, "model": handle.config.model, "provider": handle.config.provider_name}
        signals = _SignalGuard(handle)
        try:
            prompt: str | list[ContentBlock] = [TextBlock(opts.prompt), *opts.images] if opts.images else opts.prompt
            turn = handle.start_turn(prompt, output_schema=opts.output_schema)
            try:
                _print_events(turn, printer)
            except KeyboardInterrupt:
                if not _print_after_cancel(turn, printer):
                    return printer.interrupted(signal.SIGINT)
        finally:
            signals.restore()
        if signals.received:
            wound_down = turn.completed and turn.error is None
            return printer.interrupted(signals.received, turn.result if wound_down else None, handle)
        result = turn.result  # raises the turn's error
    except Exception as e:
        printer.failure(e)
        raise
    printer.result(result, handle)
    code = EXIT_CODES[result.stop_reason]
    if opts.fail_on_deny and printer.denied and code == 0:
        from openheim.errors import DENIED

        err.write(f"openheim: {len(printer.denied)} tool call(s) denied; exiting {DENIED} (--fail-on-deny)\n")
        return DENIED
    return code


def _print_events(turn: Turn, printer: Printer) -> None:
    for batch in turn.batches():
        printer.events(batch)


def _print_after_cancel(turn: Turn, printer: Printer) -> bool:
    """After Ctrl-C: cancel, and print what the winding-down turn still says; False when it did not end cleanly."""
    try:
        turn.cancel()
        _print_events(turn, printer)
    except KeyboardInterrupt:
        return False
    finally:
        printer.out.flush()
        # The process ends now: an echo of the key press arriving later must not kill it on its way out.
        ignore(signal.SIGINT)
    return turn.completed and turn.error is None


class _SignalGuard:
    """While the turn runs: SIGTERM/SIGHUP kill the tools' process groups and cancel the turn (exit
    128+signal); SIGINT is KeyboardInterrupt, except a repeat right after the first (the frozen binary's
    bootloader forwards the terminal's SIGINT to us, so one key press can arrive twice)."""

    def __init__(self, handle: Session) -> None:
        self.received = 0
        self._handle = handle
        self._first_interrupt: float | None = None
        self._route = SignalRoute(self._on_signal, keep_custom_sigint=True)

    def _on_signal(self, signum: int) -> None:
        if signum == signal.SIGINT:
            now = time.monotonic()
            if self._first_interrupt is None or now - self._first_interrupt > DOUBLE_INTERRUPT:
                self._first_interrupt = self._first_interrupt or now
                raise KeyboardInterrupt
            return
        from openheim.tools.process import kill_all

        self.received = signum
        kill_all()
        self._handle.cancel()

    def restore(self) -> None:
        self._route.restore()


# --- the command ---------------------------------------------------------------------------

HABITS = {"--json": "-o json", "--stream-json": "-o stream-json", "--output-format": "-o"}  # other tools' flags


class RunCommand(click.Command):
    """`run` with pointers for flags other tools use: `--json` is `-o json` here."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as e:
            ours = HABITS.get(e.option_name.split("=")[0])
            if ours is None:
                raise
            raise click.UsageError(f"no such option {e.option_name}; use {ours} (see --output)", ctx) from None


@click.command("run", cls=RunCommand, epilog=EXIT_CODE_HELP)
@click.argument("prompt", required=False)
@click.option("-m", "--model", help="Model name (looked up across providers).")
@click.option("-p", "--provider", help="Provider name from config.toml.")
@click.option("--max-iterations", type=click.IntRange(min=1), help="Agent loop iteration cap.")
@click.option(
    "--max-tokens-total",
    type=click.IntRange(min=1),
    metavar="N",
    help="Token budget of the turn: input + output over every model call (exit 6 when reached).",
)
@click.option(
    "--timeout",
    "turn_timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Time budget of the turn, wall clock; the running stream and tools are cancelled (exit 6).",
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0, min_open=True),
    metavar="USD",
    help="Dollar budget of the turn, subagents included, at the model's [prices] entry (exit 6).",
)
@click.option(
    "-i",
    "--image",
    "images",
    multiple=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Send this image (PNG, JPEG, GIF or WebP, up to 5 MB) with the prompt (repeatable).",
)
@click.option(
    "--output-schema",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A JSON Schema the final answer must match: printed as JSON, 'structured' in --output json "
    "(exit 7 when it still does not match after one repair round).",
)
@click.option(
    "--cwd",
    type=click.Path(exists=True, file_okay=False, resolve_path=True),
    help="Session working directory (default: the current directory).",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json", "stream-json"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--approve",
    type=click.Choice(["all", "reads", "none"]),
    default="all",
    show_default=True,
    help="Which tool calls run: all, only read-only ones, or none.",
)
@click.option("-s", "--session", "session_id", help="Resume this session id.")
@click.option("-c", "--continue", "resume_latest", is_flag=True, help="Resume the latest session in this directory.")
@click.option(
    "--fork",
    is_flag=True,
    help="With --session/--continue: run on a new copy of that session (its "
    "history copied, its checkpoints shared); the original stays as it was.",
)
@click.option("-v", "--verbose", is_flag=True, help="Show tool activity and notices on stderr.")
# record and replay (docs/pipelines.md)
@click.option(
    "--record",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write every provider exchange to FILE (JSON Lines, secrets removed).",
)
@click.option(
    "--replay",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Serve the provider exchanges recorded in FILE: no network; a request that differs exits 2.",
)
# permission rules (docs/pipelines.md)
@click.option(
    "--allow",
    "allow_rules",
    multiple=True,
    metavar="RULE",
    help="Let matching tool calls run, e.g. 'write_file(src/**)' (repeatable).",
)
@click.option(
    "--deny",
    "deny_rules",
    multiple=True,
    metavar="RULE",
    help="Refuse matching tool calls, e.g. 'execute_command(rm *)' (repeatable; wins over --allow).",
)
@click.option(
    "--fail-on-deny",
    is_flag=True,
    help="Exit 8 when a tool call was denied (by --approve or a rule), even if the model finished.",
)
@sandbox_options
@click.pass_context
def run_command(
    ctx: click.Context,
    prompt: str | None,
    model: str | None,
    provider: str | None,
    max_iterations: int | None,
    max_tokens_total: int | None,
    turn_timeout: float | None,
    max_cost: float | None,
    images: tuple[str, ...],
    output_schema: str | None,
    cwd: str | None,
    output: str,
    approve: str,
    session_id: str | None,
    resume_latest: bool,
    verbose: bool,
    record: str | None = None,
    replay: str | None = None,
    allow_rules: tuple[str, ...] = (),
    deny_rules: tuple[str, ...] = (),
    fail_on_deny: bool = False,
    sandbox_mode: str | None = None,
    sandbox_required: bool | None = None,
    fork: bool = False,
) -> None:
    """Run one prompt headless. With no PROMPT, piped stdin is the prompt; with both, stdin is added as context."""
    from openheim.client import OpenheimClient

    try:
        if session_id and resume_latest:
            raise click.UsageError("use either --session or --continue, not both")
        if fork and not (session_id or resume_latest):
            raise click.UsageError("--fork needs the session to copy: add --session ID or --continue")
        if record and replay:
            raise click.UsageError("use either --record or --replay, not both")
        schema = _output_schema(output_schema)
        blocks = _images(images)
        text = _prompt_text(prompt)
        client = (
            OpenheimClient.builder()
            .config_path(ctx.obj.get("config_path"))
            .mcp_config(ctx.obj.get("mcp_config"))
            .provider(provider)
            .model(model)
            .max_iterations(max_iterations)
            .max_tokens_total(max_tokens_total)
            .max_cost(max_cost)
            .turn_timeout_secs(turn_timeout)
            .record(record)
            .replay(replay)
            .permissions(allow_rules, deny_rules, "command line")
            .sandbox(*chosen(ctx, sandbox_mode, sandbox_required))
            .build()
        )
    except Exception as e:  # --output json/stream-json: scripts get an object for this failure too
        print_failure(output, e)
        raise
    collect_from_now_on()
    opts = RunOptions(
        text,
        output,
        verbose,
        approve,
        Path(cwd) if cwd else None,
        session_id,
        resume_latest,
        output_schema=schema,
        fail_on_deny=fail_on_deny,
        images=blocks,
        fork=fork,
    )
    try:
        code = run_prompt(client, opts)
    finally:  # the answer is out: MCP servers stop on their own time, not the user's
        client.close(wait_for_servers=False)
    exit_now(code)


def collect_from_now_on() -> None:
    """Start-up is over: the cycle collector (held off since the process began, see __main__) runs again,
    never scanning what start-up made. Scanning it while it was being made cost a plain run 5% of its CPU."""
    import gc

    gc.freeze()
    gc.enable()


def exit_now(code: int) -> NoReturn:
    """Exit without tearing the interpreter down: unwinding every loaded module costs a plain run about 15% of
    its CPU time, and half a second with the MCP SDK loaded. Everything is saved and closed by now (no atexit
    hook of ours is left to run; every thread is a daemon); MCP servers see their stdin close as this process
    ends."""
    import logging

    from openheim.errors import BROKEN_PIPE

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # `| head` went away: the documented quiet exit
            code = BROKEN_PIPE if stream is sys.stdout else code
        except (OSError, ValueError):
            pass
    os._exit(code)


def _output_schema(path: str | None) -> OutputSchema | None:
    """The --output-schema file, checked before anything runs (imported only when the option is used)."""
    if path is None:
        return None
    from openheim.core.structured import load_output_schema

    return load_output_schema(path)


def _images(paths: tuple[str, ...]) -> list[ImageBlock]:
    """The -i files as image blocks, each checked before anything runs (type by content, size capped)."""
    if not paths:
        return []
    from openheim.core.images import load_image

    return [load_image(p) for p in paths]


def _prompt_text(prompt: str | None) -> str:
    piped = None
    if not sys.stdin.isatty():
        piped = sys.stdin.buffer.read().decode("utf-8", "replace")
    if prompt and piped and piped.strip():
        return f"{prompt}\n\n{piped}"
    text = prompt or piped or ""
    if not text.strip():
        raise click.UsageError("no prompt given: pass PROMPT or pipe text on stdin")
    return text
