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
_LAUNCH = "import sys;sys.path[0]={!r};from openheim.sandbox import launch;sys.exit(launch.main(sys.argv[1:]))"
REFUSED_EXIT = 125  # the helper's exit code when the sandbox is required and not enforced


@dataclass(frozen=True)
class Sandbox:
    """The ``[sandbox]`` settings a session runs its commands with."""

    mode: str = "workspace-write"  # read-only | workspace-write | off
    network: bool = False
    writable_roots: tuple[str, ...] = ()
    required: bool = False
    keep_env: tuple[str, ...] = ()  # channel variables (TMUX, SSH_AUTH_SOCK, ...) the user keeps
    unix_sockets: tuple[str, ...] | bool = ()  # named Unix sockets a command may reach; True: every one
    limits: tuple[tuple[str, int], ...] = ()  # (name, value): address_space_mb, file_size_mb, processes, cpu_secs
    hidden: tuple[str, ...] = ()  # openheim's data dir and config file: not readable by a command

    @classmethod
    def from_config(cls, config: SandboxConfig, hidden: tuple[str, ...] = ()) -> Sandbox:
        sockets = config.allow_unix_sockets
        return cls(
            config.mode,
            config.network,
            tuple(config.writable_roots),
            config.required,
            tuple(config.keep_env),
            sockets if isinstance(sockets, bool) else tuple(sockets),
            tuple(sorted(config.limits.items())),
            hidden,
        )

    @property
    def active(self) -> bool:
        return self.mode != "off"

    def writable(self, root: str | os.PathLike) -> list[str]:
        """The directories a command may write besides its private temp dir (``writable_roots`` that a symlink
        inside the root or another writable root would widen are left out: see ``linked_roots``)."""
        if self.mode != "workspace-write":
            return []
        refused = {path for path, _link in self.linked_roots(root)}
        return list(dict.fromkeys([os.fspath(root), *(r for r in self.writable_roots if r not in refused)]))

    def linked_roots(self, root: str | os.PathLike) -> list[tuple[str, str]]:
        """(entry, the symlink in it) for each ``writable_roots`` entry that is, or passes through, a symlink
        inside a tree a command may write (the root or another entry): a repository could ship that link."""
        trees = [os.fspath(root), *self.writable_roots]
        found = []
        for entry in self.writable_roots:
            link = _link_inside(entry, [t for t in trees if t != entry])
            if link:
                found.append((entry, link))
        return found

    def helper_options(self, root: str | os.PathLike, tmp: str | None = None, parent: int | None = None) -> list[str]:
        """The helper's options (everything before ``--``)."""
        opts = [
            "--mode",
            self.mode,
            *(["--network"] if self.network else []),
            *(["--required"] if self.required else []),
        ]
        for path in self.writable(root):
            opts += ["--write", path, *(a for name in PROTECTED for a in ("--protect", os.path.join(path, name)))]
        for path in self.hidden:
            opts += ["--hide", path]
        for name in self.keep_env:
            opts += ["--keep-env", name]
        if self.unix_sockets is True:
            opts.append("--unix-all")
        for path in self.unix_sockets if isinstance(self.unix_sockets, tuple) else ():
            opts += ["--unix", path]
        for name, value in self.limits:
            opts += ["--limit", f"{name}={value}"]
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


def _link_inside(path: str, trees: list[str]) -> str | None:
    """The first component of ``path`` that is a symlink and lies inside one of ``trees``; None if none."""
    current = "/"
    for part in [p for p in path.split("/") if p]:
        current = os.path.join(current, part)
        inside = any(current.startswith(t.rstrip("/") + "/") for t in trees)
        if inside and os.path.islink(current):
            return current
    return None


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


_UNIX_REFUSED = r"Address family not supported|\[Errno 97\]|EAFNOSUPPORT"  # the filter's answer to socket(AF_UNIX)


def explain_refusal(sandbox: Sandbox, root: str | os.PathLike, output: str) -> str | None:
    """What the sandbox refused, judged from a failed command's output: one line for each kind it met (a
    write, a network socket, a named Unix socket), once each; None when nothing in it looks like a refusal."""
    if not sandbox.active:
        return None
    lines = [line for line in (_unix_refusal(sandbox, output), _network_refusal(sandbox, output)) if line]
    write = _write_refusal(sandbox, root, output)
    return "\n".join([*([write] if write else []), *lines]) or None


def _unix_refusal(sandbox: Sandbox, output: str) -> str | None:
    if sandbox.unix_sockets is True or not re.search(_UNIX_REFUSED, output):
        return None
    return (
        f"sandbox ({sandbox.mode}) refused a Unix socket: named sockets (tmux, screen, D-Bus, ssh/gpg agents, "
        "docker, X11) are closed to commands (list one in [sandbox] allow_unix_sockets to allow it)"
    )


def _network_refusal(sandbox: Sandbox, output: str) -> str | None:
    if sandbox.network or not (re.search(_NOT_PERMITTED, output) and re.search(_NETWORK_WORDS, output)):
        return None
    return (
        f"sandbox ({sandbox.mode}) refused a network socket: the network is off for commands "
        "(set [sandbox] network = true to allow it)"
    )


def _write_refusal(sandbox: Sandbox, root: str | os.PathLike, output: str) -> str | None:
    match = re.search(_DENIED, output)
    if match is None:
        return None
    writable = ", ".join([*sandbox.writable(root), "$TMPDIR"])
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
