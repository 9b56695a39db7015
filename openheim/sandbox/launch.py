"""The sandbox helper's entry point: ``--serve FD`` starts the fork server (forkserver.py), anything else runs
one command (helper.py). Standard library only, like both."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if argv[:1] == ["--serve"]:
        from openheim.sandbox.forkserver import serve  # the fork server: its own imports, once per openheim

        return serve(int(argv[1]))
    from openheim.sandbox.helper import main as run_one

    return run_one(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
