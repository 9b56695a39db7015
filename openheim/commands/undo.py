"""`openheim undo`: restore the files a session's last turns changed (from openheim's own checkpoints)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from openheim.client import OpenheimClient
from openheim.core.control_chars import visible
from openheim.errors import InvalidArgument

if TYPE_CHECKING:
    from openheim.checkpoints.undo import UndoResult


@click.command("undo")
@click.option(
    "-s",
    "--session",
    "session_id",
    help="The session (default: the latest one started in this directory, as --continue picks it).",
)
@click.option(
    "--turns",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="How many of the session's last file-changing turns to undo.",
)
@click.option("-y", "--yes", is_flag=True, help="Restore without asking.")
@click.option("--force", is_flag=True, help="Also overwrite files changed since those turns.")
@click.pass_context
def undo_command(ctx: click.Context, session_id: str | None, turns: int, yes: bool, force: bool) -> None:
    """Show the files the last turn changed and restore them: modified and deleted files come back, added files
    are removed. Works with or without git; files outside the sandbox root are never touched."""
    with OpenheimClient.builder().config_path(ctx.obj.get("config_path") if ctx.obj else None).build() as client:
        if session_id is None:
            cwd = Path(os.getcwd()).absolute()
            metas = client.list_sessions(str(cwd))
            if not metas:
                raise InvalidArgument(f"no session started in {cwd}; pass --session ID (see `openheim sessions list`)")
            session_id = metas[0].id
        session, _ = client.resume_session(session_id)
        plan = session.plan_undo(turns)
        numbers = ", ".join(str(r.turn) for r in plan.turns)
        click.echo(visible(f"undo of turn {numbers} of session {plan.session_id} in {plan.turns[-1].root}:"))
        for line in plan.diffstat():
            click.echo(visible(line, one_line=True))
        if plan.conflicts and not force:
            names = visible(", ".join(i.path for i in plan.conflicts), one_line=True)
            raise InvalidArgument(
                f"not undone: {len(plan.conflicts)} file(s) changed since that turn ({names}); "
                "re-run with --force to overwrite them"
            )
        if not yes:
            if not sys.stdin.isatty():
                raise InvalidArgument("not undone: add --yes to restore these files without being asked")
            if not click.confirm("Restore these files?", default=False):
                click.echo("nothing changed")
                return
        result = session.undo(plan=plan, force=force)
    _report(result)


def _report(result: UndoResult) -> None:
    """What the undo did, one line; then one line per file it refused to write."""
    first, *refused = result.summary()
    click.echo(visible(first, one_line=True))
    for line in refused:
        click.echo(visible(line, one_line=True), err=True)
