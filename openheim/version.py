"""The version of openheim (a leaf: importing it loads nothing else)."""

import os

__version__ = "0.1.0"

# A built binary carries the commit it was built from in this file (build/openheim.spec writes it); a pip
# install or a checkout has none.
BUILD_COMMIT_FILE = "build_commit.txt"


def build_commit() -> str:
    """The commit this binary was built from ('' when it was not built by build/build.sh)."""
    path = os.path.join(os.path.dirname(__file__), BUILD_COMMIT_FILE)
    try:
        with open(path, encoding="ascii") as f:
            return f.read(80).strip()
    except (OSError, UnicodeDecodeError):
        return ""


def version_line() -> str:
    """What `openheim --version` prints: ``openheim, version 0.1.0`` and, in a built binary, its commit."""
    commit = build_commit()
    return f"openheim, version {__version__}" + (f" (commit {commit})" if commit else "")
