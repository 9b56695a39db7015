"""What a sandboxed command may touch, turned into the helper's command line; and how a refusal reads."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openheim.config.schema import SandboxConfig

HELPER_DIR = Path(__file__).resolve().parent
PROTECTED = (".git", ".openheim")  # code that runs later, outside the sandbox: read-only inside a writable root
_LAUNCH = "import sys;sys.path[0]={!r};from openheim.sandbox import helper;sys.exit(helper.main(sys.argv[1:]))"
REFUSED_EXIT = 125  # the helper's exit code when the sandbox is required and not enforced


@dataclass(frozen=True)
class Sandbox:
    """The ``[sandbox]`` settings a session runs its commands with."""

    mode: str = "workspace-write"  # read-only | workspace-write | off
    network: bool = False
    writable_roots: tuple[str, ...] = ()
    required: bool = False

    @classmethod
    def from_config(cls, config: SandboxConfig) -> Sandbox:
        return cls(config.mode, config.network, tuple(config.writable_roots), config.required)

    @property
    def active(self) -> bool:
        return self.mode != "off"

    def writable(self, root: str | os.PathLike) -> list[str]:
        """The directories a command may write besides its private temp dir."""
        if self.mode != "workspace-write":
            return []
        return list(dict.fromkeys([os.fspath(root), *self.writable_roots]))

    def helper_options(self, root: str | os.PathLike, tmp: str | None = None, parent: int | None = None) -> list[str]:
        """The helper's options (everything before ``--``)."""
        opts = ["--mode", self.mode]
        if self.network:
            opts.append("--network")
        if self.required:
            opts.append("--required")
        for path in self.writable(root):
            opts += ["--write", path]
        for path in self.writable(root):
            for name in PROTECTED:
                opts += ["--protect", os.path.join(path, name)]
        if tmp:
            opts += ["--tmp", tmp]
        if parent:
            opts += ["--parent", str(parent)]
        return opts

    def wrap(
        self, argv: list[str], root: str | os.PathLike, tmp: str | None = None, parent: int | None = None
    ) -> list[str]:
        """``argv`` run through the helper (unchanged when the mode is off)."""
        if not self.active:
            return list(argv)
        return [*helper_command(), *self.helper_options(root, tmp, parent), "--", *argv]

    def label(self) -> str:
        return f"{self.mode}, network {'on' if self.network else 'off'}"


def helper_command() -> list[str]:
    """How to start the helper: the frozen binary's own ``sandbox exec``, else this Python on helper.py
    (``-I -S``: no site-packages processing and no user paths, only the directory holding this package, so it
    starts in a few milliseconds)."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "sandbox", "exec"]
    return [sys.executable, "-I", "-S", "-c", _LAUNCH.format(str(HELPER_DIR.parent.parent))]


# patterns compile on first use (re caches them): most runs never see a refusal
_DENIED = (
    r"(?:'([^'\n]+)'|‘([^’\n]+)’|(\S+?)):? ?(?:\[Errno \d+\] )?"
    r"(Permission denied|Read-only file system|Invalid cross-device link)(?:: '([^'\n]+)')?"
)
_NETWORK_WORDS = r"(?i)socket|connect|network|resolv|urlopen|\bcurl\b|\bwget\b|\bnc\b|\bping\b"
_NOT_PERMITTED = r"Operation not permitted|\[Errno 1\]|\bEPERM\b"


def explain_refusal(sandbox: Sandbox, root: str | os.PathLike, output: str) -> str | None:
    """One line saying what the sandbox refused, judged from a failed command's output; None when nothing
    in it looks like a refusal."""
    if not sandbox.active:
        return None
    writable = ", ".join([*sandbox.writable(root), "$TMPDIR"])
    if not sandbox.network and re.search(_NOT_PERMITTED, output) and re.search(_NETWORK_WORDS, output):
        return (
            f"sandbox ({sandbox.mode}) refused a network socket: the network is off for commands "
            "(set [sandbox] network = true to allow it)"
        )
    match = re.search(_DENIED, output)
    if match is None:
        return None
    path = next((g for g in (match.group(5), match.group(1), match.group(2), match.group(3)) if g), "")
    shown = _home_short(path.rstrip(":"))
    if match.group(4) == "Read-only file system":
        return (
            f"sandbox ({sandbox.mode}) refused writing {shown}: {' and '.join(PROTECTED)} stay read-only "
            f"(hooks and config run later, outside the sandbox); writable: {writable}"
        )
    what = "a hard link to" if match.group(4) == "Invalid cross-device link" else "writing"
    return f"sandbox ({sandbox.mode}) refused {what} {shown}; writable: {writable}"


def _home_short(path: str) -> str:
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + "/")):
        return "~" + path[len(home) :]
    return path
