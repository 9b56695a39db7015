"""``--sandbox``/``--sandbox-required`` for the front ends, and the hidden ``openheim sandbox exec`` helper."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])
# config.schema.SANDBOX_MODES, spelled out: importing the config package here would slow every CLI start
SANDBOX_MODES = ("read-only", "workspace-write", "off")


def sandbox_options(f: F) -> F:
    """Add ``--sandbox MODE`` and ``--sandbox-required`` (they override ``[sandbox]``; see docs/security.md)."""
    f = click.option(
        "--sandbox-required",
        "sandbox_required",
        is_flag=True,
        default=None,
        help="Refuse shell commands when the kernel cannot enforce the sandbox mode.",
    )(f)
    return click.option(
        "--sandbox",
        "sandbox_mode",
        type=click.Choice(SANDBOX_MODES),
        metavar="MODE",
        help="How the kernel confines shell commands: read-only, workspace-write (default) or off.",
    )(f)


def chosen(ctx: click.Context, mode: str | None, required: bool | None) -> tuple[str | None, bool | None]:
    """A subcommand's own options, else the root group's (``openheim --sandbox off run ...``)."""
    obj = ctx.obj or {}
    return mode or obj.get("sandbox_mode"), required or obj.get("sandbox_required")


@click.group("sandbox", hidden=True)
def sandbox_group() -> None:
    """The sandbox helper openheim starts commands through (not meant to be typed)."""


@sandbox_group.command(
    "exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False, "help_option_names": []}
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def exec_command(args: tuple[str, ...]) -> None:
    """Restrict this process, run COMMAND, kill what it leaves: openheim sandbox exec [OPTIONS] -- COMMAND..."""
    import sys

    from openheim.sandbox.launch import main

    sys.exit(main(list(args)))
