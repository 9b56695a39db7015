"""The `openheim` command line; the only place that turns errors into messages and exit codes."""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from openheim import __version__
from openheim.errors import describe, error_message, exit_code_for

if TYPE_CHECKING:
    from typing import NoReturn

    from openheim.core.structured import OutputSchema
    from openheim.memory.long_term import LongTermMemory

EXIT_CODE_HELP = """\b
Exit codes:
  0    the model finished (end_turn; also no_content, with a notice)
  1    runtime or provider error (also: session locked or busy)
  2    usage or configuration error (also: a replay that differs from its recording)
  3    stopped at max_iterations
  4    reply cut off at max_tokens
  5    the model refused
  6    stopped at a budget (--max-tokens-total, --timeout)
  7    the answer did not match --output-schema (after one repair round)
  130  interrupted (Ctrl-C); SIGTERM/SIGHUP exit with 128+signal
"""


class LazyGroup(click.Group):
    """Subcommands named here are imported only when used, keeping `--version` light."""

    lazy = {
        "mcp": "openheim.mcp.cli:mcp",
        "memory": "openheim.memory.cli:memory",
        "sessions": "openheim.conversation.cli:sessions",
        "permissions": "openheim.transport.permissions:permissions",
        "acp": "openheim.transport.stdio:acp_command",
        "stdio": "openheim.transport.stdio:stdio_command",
        "serve": "openheim.transport.ws:serve_command",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            module, attr = self.lazy[name].split(":")
            try:
                return getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError):
                return None
        return super().get_command(ctx, name)

    def invoke(self, ctx: click.Context) -> object:
        """Every subcommand's openheim errors become one stderr line and the documented exit code."""
        from openheim.errors import OpenheimError

        try:
            return super().invoke(ctx)
        except OpenheimError as e:
            fail(describe(e), exit_code_for(e))
        except KeyboardInterrupt:
            sys.exit(130)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as e:  # a file we could not read or write, or a bug: still one line
            import logging

            logging.getLogger("openheim").debug("unexpected error", exc_info=True)
            fail(error_message(e), exit_code_for(e))


def setup_logging() -> None:
    """Log lines on stderr at OPENHEIM_LOG's level, with secrets (keys, URL credentials, query values) redacted."""
    import logging

    from openheim.config.secrecy import RedactingFilter

    level = os.environ.get("OPENHEIM_LOG", "warning").strip().upper() or "WARNING"
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level, logging.WARNING),
                        format="openheim: %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    for noisy in ("urllib3", "sseclient"):  # request lines with query strings; a line per stream event
        logging.getLogger(noisy).setLevel(max(logging.INFO, logging.getLogger().level))


def fail(message: str, code: int) -> NoReturn:
    """Print one line on stderr (secrets redacted) and exit."""
    from openheim.config.secrecy import redact

    click.echo(f"Error: {redact(message)}", err=True)
    sys.exit(code)


@click.group(cls=LazyGroup, invoke_without_command=True, epilog=EXIT_CODE_HELP,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="openheim")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), envvar=None,
              help="Config file (default: $OPENHEIM_CONFIG, else $OPENHEIM_HOME/config.toml, "
                   "else ~/.openheim/config.toml).")
@click.option("--mcp-config", "mcp_config", type=click.Path(dir_okay=False), metavar="FILE",
              help='Also use the MCP servers of this {"mcpServers": ...} JSON file.')
@click.option("--skills", help="Comma-separated skills for the chat's new session (with no subcommand).")
@click.pass_context
def main(ctx: click.Context, config_path: str | None, mcp_config: str | None, skills: str | None) -> None:
    """openheim: a multi-provider LLM agent runtime (Anthropic, OpenAI, Gemini, OpenAI-compatible).

    With no subcommand it opens the terminal chat (type :help there)."""
    setup_logging()
    ctx.ensure_object(dict)
    ctx.obj["config_path"] = config_path
    ctx.obj["mcp_config"] = mcp_config
    ctx.obj["ltm_factory"] = lambda: _long_term_memory(config_path)
    if ctx.invoked_subcommand is None:
        sys.exit(_chat(config_path, mcp_config, skills))


def _chat(config_path: str | None, mcp_config: str | None, skills: str | None) -> int:
    """The curses chat; without a terminal, a hint to use `openheim run` (exit 2)."""
    from openheim.client import OpenheimClient

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        click.echo("openheim: the chat needs a terminal; for scripts and pipes use `openheim run \"PROMPT\"`",
                   err=True)
        return 2
    names = [s.strip() for s in (skills or "").split(",") if s.strip()]
    with OpenheimClient.builder().config_path(config_path).mcp_config(mcp_config).build() as client:
        available = {s.name for s in client.skills()}
        unknown = [n for n in names if n not in available]
        if unknown:
            raise click.UsageError(f"unknown skill '{unknown[0]}' (available: "
                                   f"{', '.join(sorted(available)) or 'none'}; "
                                   f"add {client.data_dir / 'skills' / unknown[0]}.md to create it)")
        from openheim.tui import run_tui

        return run_tui(client, names, __version__)


def _long_term_memory(config_path: str | None) -> LongTermMemory:
    from openheim.config.load import data_dir, load_config
    from openheim.memory.setup import long_term_memory

    config = load_config(config_path)
    return long_term_memory(config, data_dir(config))


@main.command()
@click.option("--force", is_flag=True, help="Overwrite an existing config.toml (the old one is kept as .bak).")
@click.pass_context
def init(ctx: click.Context, force: bool) -> None:
    """Write a starter config.toml and system.md."""
    from openheim.config.init import write_initial_files

    config, system = write_initial_files(ctx.obj.get("config_path"), force)
    click.echo(f"Config file created at {config}")
    click.echo(f"Identity file at {system}")
    click.echo("Edit the [providers] section and set the API key variables it names (e.g. OPENAI_API_KEY).")


@main.command(epilog=EXIT_CODE_HELP)
@click.argument("prompt", required=False)
@click.option("-m", "--model", help="Model name (looked up across providers).")
@click.option("-p", "--provider", help="Provider name from config.toml.")
@click.option("--max-iterations", type=click.IntRange(min=1), help="Agent loop iteration cap.")
@click.option("--max-tokens-total", type=click.IntRange(min=1), metavar="N",
              help="Token budget of the turn: input + output over every model call (exit 6 when reached).")
@click.option("--timeout", "turn_timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Time budget of the turn, wall clock; the running stream and tools are cancelled (exit 6).")
@click.option("--output-schema", type=click.Path(dir_okay=False), metavar="FILE",
              help="A JSON Schema the final answer must match: printed as JSON, 'structured' in --output json "
                   "(exit 7 when it still does not match after one repair round).")
@click.option("--cwd", type=click.Path(exists=True, file_okay=False, resolve_path=True),
              help="Session working directory (default: the current directory).")
@click.option("-o", "--output", type=click.Choice(["text", "json", "stream-json"]), default="text",
              show_default=True, help="Output format.")
@click.option("--approve", type=click.Choice(["all", "reads", "none"]), default="all", show_default=True,
              help="Which tool calls run: all, only read-only ones, or none.")
@click.option("-s", "--session", "session_id", help="Resume this session id.")
@click.option("-c", "--continue", "resume_latest", is_flag=True, help="Resume the latest session in this directory.")
@click.option("-v", "--verbose", is_flag=True, help="Show tool activity and notices on stderr.")
# record and replay (docs/pipelines.md)
@click.option("--record", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write every provider exchange to FILE (JSON Lines, secrets removed).")
@click.option("--replay", type=click.Path(dir_okay=False), metavar="FILE",
              help="Serve the provider exchanges recorded in FILE: no network; a request that differs exits 2.")
# permission rules (docs/pipelines.md)
@click.option("--allow", "allow_rules", multiple=True, metavar="RULE",
              help="Let matching tool calls run, e.g. 'write_file(src/**)' (repeatable).")
@click.option("--deny", "deny_rules", multiple=True, metavar="RULE",
              help="Refuse matching tool calls, e.g. 'execute_command(rm *)' (repeatable; wins over --allow).")
@click.pass_context
def run(ctx: click.Context, prompt: str | None, model: str | None, provider: str | None,
        max_iterations: int | None, max_tokens_total: int | None, turn_timeout: float | None,
        output_schema: str | None, cwd: str | None, output: str, approve: str, session_id: str | None,
        resume_latest: bool, verbose: bool, record: str | None = None, replay: str | None = None,
        allow_rules: tuple[str, ...] = (), deny_rules: tuple[str, ...] = ()) -> None:
    """Run one prompt headless. With no PROMPT, piped stdin is the prompt; with both, stdin is added as context."""
    from openheim.client import OpenheimClient
    from openheim.transport.run import RunOptions, print_failure, run_prompt

    try:
        if session_id and resume_latest:
            raise click.UsageError("use either --session or --continue, not both")
        if record and replay:
            raise click.UsageError("use either --record or --replay, not both")
        schema = _output_schema(output_schema)
        text = _prompt_text(prompt)
        client = (OpenheimClient.builder().config_path(ctx.obj.get("config_path"))
                  .mcp_config(ctx.obj.get("mcp_config")).provider(provider).model(model)
                  .max_iterations(max_iterations).max_tokens_total(max_tokens_total)
                  .turn_timeout_secs(turn_timeout).record(record).replay(replay)
                  .permissions(allow_rules, deny_rules, "command line").build())
    except Exception as e:  # --output json/stream-json: scripts get an object for this failure too
        print_failure(output, e)
        raise
    opts = RunOptions(text, output, verbose, approve, Path(cwd) if cwd else None, session_id, resume_latest,
                      output_schema=schema)
    with client:  # closing stops the MCP servers
        code = run_prompt(client, opts)
    sys.exit(code)


def _output_schema(path: str | None) -> OutputSchema | None:
    """The --output-schema file, checked before anything runs (imported only when the option is used)."""
    if path is None:
        return None
    from openheim.core.structured import load_output_schema

    return load_output_schema(path)


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



# --- openheim doctor ---------------------------------------------------------------------------

@main.command(epilog="\b\nExit codes:\n  0    all is well (warnings allowed)\n"
                     "  1    a check failed: config, data dir, default provider's key or api_base, CA bundle")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of lines.")
@click.option("--timeout", type=click.FloatRange(min=0), default=10.0, show_default=True,
              help="Seconds to wait for MCP servers that are still starting.")
@click.pass_context
def doctor(ctx: click.Context, as_json: bool, timeout: float) -> None:
    """Check this installation: config, providers and keys, vectors, MCP servers, CA bundle, terminal, locale."""
    import json

    from openheim import doctor as checks_module
    from openheim.config.secrecy import redact

    checks = checks_module.run_checks(ctx.obj.get("config_path"), ctx.obj.get("mcp_config"), timeout)
    if as_json:
        click.echo(redact(json.dumps(checks_module.as_json(checks), ensure_ascii=False, indent=2)))
    else:
        for line in checks_module.as_lines(checks):
            click.echo(redact(line))
    sys.exit(checks_module.exit_code(checks))
