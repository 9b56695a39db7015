"""Headless `openheim run`: one prompt, the reply streamed to stdout, an exit code that means something."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import click

from openheim.client import OpenheimClient
from openheim.commands.run_output import EXIT_CODES, Printer, print_failure
from openheim.commands.sandbox import chosen, sandbox_options
from openheim.core.images import load_image
from openheim.core.models import TextBlock
from openheim.core.permission import PolicyGate
from openheim.core.signals import SignalRoute, ignore
from openheim.core.structured import load_output_schema
from openheim.errors import BROKEN_PIPE, DENIED, EXIT_CODE_HELP, InvalidArgument

if TYPE_CHECKING:
    from openheim.core.models import ContentBlock, ImageBlock
    from openheim.core.structured import OutputSchema
    from openheim.runtime.session import Session
    from openheim.runtime.turn import Turn

DOUBLE_INTERRUPT = 0.25  # seconds within which a second SIGINT is the same key press


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


def open_session(client: OpenheimClient, opts: RunOptions, cwd: Path) -> Session:

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
def run_command(ctx: click.Context, /, prompt: str | None, **flags: Any) -> None:
    """Run one prompt headless. With no PROMPT, piped stdin is the prompt; with both, stdin is added as context."""
    try:
        opts = _run_options(prompt, flags)
        client = _build_client(ctx, flags)
    except Exception as e:  # --output json/stream-json: scripts get an object for this failure too
        print_failure(flags["output"], e)
        raise
    collect_from_now_on()
    try:
        code = run_prompt(client, opts)
    except BrokenPipeError:  # `| head` went away: from now on nothing is printed, not even a warning
        logging.disable(logging.CRITICAL)
        raise
    finally:  # the answer is out: MCP servers stop on their own time, not the user's
        client.close(wait_for_servers=False)
    exit_now(code)


def _run_options(prompt: str | None, flags: dict[str, Any]) -> RunOptions:
    """The flags checked together, then the schema, images and prompt read, before anything is built."""
    if flags["session_id"] and flags["resume_latest"]:
        raise click.UsageError("use either --session or --continue, not both")
    if flags["fork"] and not (flags["session_id"] or flags["resume_latest"]):
        raise click.UsageError("--fork needs the session to copy: add --session ID or --continue")
    if flags["record"] and flags["replay"]:
        raise click.UsageError("use either --record or --replay, not both")
    schema = _output_schema(flags["output_schema"])
    blocks = _images(flags["images"])
    return RunOptions(
        _prompt_text(prompt),
        flags["output"],
        flags["verbose"],
        flags["approve"],
        Path(flags["cwd"]) if flags["cwd"] else None,
        flags["session_id"],
        flags["resume_latest"],
        output_schema=schema,
        fail_on_deny=flags["fail_on_deny"],
        images=blocks,
        fork=flags["fork"],
    )


def _build_client(ctx: click.Context, flags: dict[str, Any]) -> OpenheimClient:
    """The client of this run: the config file and --mcp-config, overridden by the run's flags."""
    return (
        OpenheimClient.builder()
        .config_path(ctx.obj.get("config_path"))
        .mcp_config(ctx.obj.get("mcp_config"))
        .provider(flags["provider"])
        .model(flags["model"])
        .max_iterations(flags["max_iterations"])
        .max_tokens_total(flags["max_tokens_total"])
        .max_cost(flags["max_cost"])
        .turn_timeout_secs(flags["turn_timeout"])
        .record(flags.get("record"))
        .replay(flags.get("replay"))
        .permissions(flags.get("allow_rules", ()), flags.get("deny_rules", ()), "command line")
        .sandbox(*chosen(ctx, flags.get("sandbox_mode"), flags.get("sandbox_required")))
        .build()
    )


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

    return load_output_schema(path)


def _images(paths: tuple[str, ...]) -> list[ImageBlock]:
    """The -i files as image blocks, each checked before anything runs (type by content, size capped)."""
    if not paths:
        return []

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
