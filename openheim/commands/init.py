"""`openheim init`: write a starter config.toml and system.md."""

from __future__ import annotations

import click

from openheim.config.init import write_initial_files
from openheim.core.control_chars import visible


@click.command("init")
@click.option("--force", is_flag=True, help="Overwrite an existing config.toml (the old one is kept as .bak).")
@click.pass_context
def init_command(ctx: click.Context, force: bool) -> None:
    """Write a starter config.toml and system.md."""
    config, system = write_initial_files(ctx.obj.get("config_path"), force)
    click.echo(visible(f"Config file created at {config}"))
    click.echo(visible(f"Identity file at {system}"))
    click.echo("Edit the [providers] section and set the API key variables it names (e.g. OPENAI_API_KEY).")
