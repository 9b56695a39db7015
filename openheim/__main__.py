"""The `openheim` command (and `python -m openheim`): `--version` is answered before the CLI is imported."""

from __future__ import annotations

import gc
import sys

from openheim.version import version_line


def main() -> None:
    if sys.argv[1:3] == ["sandbox", "exec"]:  # the sandbox helper (one command or the fork server): no CLI
        from openheim.sandbox.launch import main as helper

        sys.exit(helper(sys.argv[3:]))
    try:
        if sys.argv[1:] in (["--version"], ["-V"]):
            sys.stdout.write(version_line() + "\n")
            sys.stdout.flush()
            return
        if sys.argv[1:2] == ["run"]:
            # Until its client is built, `run` makes only objects that live as long as the process (modules,
            # classes, config): no garbage for the cycle collector to find, so it waits (commands/run.py)
            gc.disable()
        from openheim.cli import main as cli

        cli()
    except BrokenPipeError:  # outside a subcommand (help text): as quiet as inside one
        from openheim.cli import stdout_gone

        stdout_gone()


if __name__ == "__main__":
    main()
