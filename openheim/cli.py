"""The `openheim` command line; the only place that turns errors into messages and exit codes."""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from typing import TYPE_CHECKING

import click

from openheim.client import OpenheimClient
from openheim.commands.sandbox import sandbox_options
from openheim.config.load import data_dir, load_config
from openheim.config.secrecy import RedactingFilter, redact
from openheim.config.unknown_keys import STRICT_ENV
from openheim.core.control_chars import visible
from openheim.errors import BROKEN_PIPE, EXIT_CODE_HELP, OpenheimError, describe, error_message, exit_code_for
from openheim.memory.setup import long_term_memory
from openheim.version import __version__, version_line

if TYPE_CHECKING:
    from typing import NoReturn

    from openheim.memory.long_term import LongTermMemory


class LazyGroup(click.Group):
    """Subcommands named here are imported only when used, keeping `--version` light."""

    lazy = {
        "run": "openheim.commands.run:run_command",
        "doctor": "openheim.commands.doctor:doctor_command",
        "init": "openheim.commands.init:init_command",
        "mcp": "openheim.commands.mcp:mcp",
        "memory": "openheim.commands.memory:memory",
        "sessions": "openheim.commands.sessions:sessions",
        "permissions": "openheim.commands.permissions:permissions",
        "acp": "openheim.commands.acp:acp_command",
        "stdio": "openheim.commands.acp:stdio_command",
        "serve": "openheim.commands.serve:serve_command",
        "undo": "openheim.commands.undo:undo_command",
        "sandbox": "openheim.commands.sandbox:sandbox_group",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            module, attr = self.lazy[name].split(":")
            try:
                command: click.Command = getattr(importlib.import_module(module), attr)
            except ImportError as e:  # a broken install: say which package is missing, not "No such command"
                raise click.ClickException(missing_package(name, e)) from None
            return command
        return super().get_command(ctx, name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command names the closest ones ("did you mean"), as git does."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError:
            name = args[0] if args else ""
            if name.startswith("-"):
                raise
            raise click.UsageError(unknown_command(name, self.list_commands(ctx)), ctx) from None

    def invoke(self, ctx: click.Context) -> object:
        """Every subcommand's openheim errors become one stderr line and the documented exit code."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            stdout_gone()
        except OpenheimError as e:
            fail(describe(e), exit_code_for(e))
        except KeyboardInterrupt:
            sys.exit(130)
        except ModuleNotFoundError as e:  # a dependency missing at run time (an optional one, a broken install)
            fail(missing_package(ctx.invoked_subcommand or "openheim", e), 1)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as e:  # a file we could not read or write, or a bug: still one line
            import logging

            logging.getLogger("openheim").debug("unexpected error", exc_info=True)
            fail(error_message(e), exit_code_for(e))


def unknown_command(name: str, commands: list[str]) -> str:
    """What to say for ``openheim NAME`` when NAME is no command: the close ones, or how to send it as a prompt.

    A prompt is never sent from here: a mistyped command must not become a paid request."""
    close = did_you_mean(name, commands)
    if close and " " not in name.strip():
        return f"no such command '{name}'; did you mean {close}?"
    what = f"'{name}' is not a command" if " " in name.strip() else f"no such command '{name}'"
    return f"{what}; to send a prompt: openheim run {shlex.quote(name)}"


def did_you_mean(name: str, choices: list[str]) -> str:
    """The choices close to a mistyped ``name``, as "'a' or 'b'" (empty when none is close)."""
    import difflib

    close = difflib.get_close_matches(name, choices, n=2, cutoff=0.7)
    return " or ".join(f"'{c}'" for c in close)


def stdout_gone() -> NoReturn:
    """Whoever read stdout went away (``| head``): end quietly with the documented code, the way a program
    ended by SIGPIPE does; stdout now leads nowhere, so the flush on the way out cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    sys.exit(BROKEN_PIPE)


def missing_package(command: str, error: ImportError) -> str:
    """One line naming the module a command could not import and how to get it."""
    name = error.name or "a dependency"
    if name.split(".")[0] == "openheim":
        return (
            f"`openheim {command}` cannot load {name}: this openheim install is incomplete; reinstall it "
            f"(pip install --force-reinstall openheim)"
        )
    package = name.split(".")[0]
    return f"`openheim {command}` needs the Python package '{package}', which is not installed: pip install {package}"


def setup_logging() -> None:
    """Log lines on stderr at OPENHEIM_LOG's level, with secrets (keys, URL credentials, query values) redacted."""
    import logging

    level = os.environ.get("OPENHEIM_LOG", "warning").strip().upper() or "WARNING"
    number = getattr(logging, level, logging.WARNING)
    # module names help whoever reads a debug log; a warning on its own is for the user: no internals
    form = "openheim: %(levelname)s %(name)s: %(message)s" if number < logging.WARNING else "openheim: %(message)s"
    logging.basicConfig(stream=sys.stderr, level=number, format=form)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    for noisy in ("urllib3", "sseclient"):  # request lines with query strings; a line per stream event
        logging.getLogger(noisy).setLevel(max(logging.INFO, logging.getLogger().level))


def fail(message: str, code: int) -> NoReturn:
    """Print one line on stderr (secrets redacted) and exit."""

    click.echo(visible(f"Error: {redact(message)}"), err=True)
    sys.exit(code)


def show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_line())
        ctx.exit()


@click.group(
    cls=LazyGroup,
    invoke_without_command=True,
    epilog=EXIT_CODE_HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=show_version,
    help="Show the version (and the commit a built binary was made from) and exit.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    envvar=None,
    help="Config file (default: $OPENHEIM_CONFIG, else $OPENHEIM_HOME/config.toml, else ~/.openheim/config.toml).",
)
@click.option(
    "--mcp-config",
    "mcp_config",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help='Also use the MCP servers of this {"mcpServers": ...} JSON file.',
)
@click.option("--skills", help="Comma-separated skills for the chat's new session (with no subcommand).")
@click.option(
    "--strict-config",
    is_flag=True,
    help="Unknown keys in config.toml are errors, not warnings (also [config] strict = true).",
)
@sandbox_options
@click.pass_context
def main(
    ctx: click.Context,
    config_path: str | None,
    mcp_config: str | None,
    skills: str | None,
    strict_config: bool = False,
    sandbox_mode: str | None = None,
    sandbox_required: bool | None = None,
) -> None:
    """openheim: a multi-provider LLM agent runtime (Anthropic, OpenAI, Gemini, OpenAI-compatible).

    With no subcommand it opens the terminal chat (type :help there)."""
    setup_logging()
    if strict_config:  # every config load of this process (and of its subagents) checks strictly
        os.environ[STRICT_ENV] = "1"
    ctx.ensure_object(dict)
    ctx.obj["config_path"] = config_path
    ctx.obj["mcp_config"] = mcp_config
    ctx.obj["sandbox_mode"], ctx.obj["sandbox_required"] = sandbox_mode, sandbox_required
    ctx.obj["ltm_factory"] = lambda: _long_term_memory(config_path)
    if ctx.invoked_subcommand is None:
        sys.exit(_chat(config_path, mcp_config, skills, sandbox_mode, sandbox_required))


def _chat(
    config_path: str | None,
    mcp_config: str | None,
    skills: str | None,
    sandbox_mode: str | None = None,
    sandbox_required: bool | None = None,
) -> int:
    """The curses chat; without a terminal, a hint to use `openheim run` (exit 2)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        click.echo('openheim: the chat needs a terminal; for scripts and pipes use `openheim run "PROMPT"`', err=True)
        return 2
    names = [s.strip() for s in (skills or "").split(",") if s.strip()]
    builder = OpenheimClient.builder().config_path(config_path).mcp_config(mcp_config)
    with builder.sandbox(sandbox_mode, sandbox_required).build() as client:
        available = {s.name for s in client.skills()}
        unknown = [n for n in names if n not in available]
        if unknown:
            raise click.UsageError(
                f"unknown skill '{unknown[0]}' (available: "
                f"{', '.join(sorted(available)) or 'none'}; "
                f"add {client.data_dir / 'skills' / unknown[0]}.md to create it)"
            )
        from openheim.tui import run_tui

        return run_tui(client, names, __version__)


def _long_term_memory(config_path: str | None) -> LongTermMemory:
    config = load_config(config_path)
    return long_term_memory(config, data_dir(config))
