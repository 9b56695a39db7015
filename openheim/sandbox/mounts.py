"""The command's private mount namespace: every repository's ``.git`` and ``.openheim`` under a writable root
read-only, openheim's data dir hidden, and a private ``/dev/pts`` (only ptys the command makes itself)."""

from __future__ import annotations

import ctypes
import os

from openheim.sandbox.kernel import fail, libc, write_file

PROTECTED = (".git", ".openheim")
WALK_DIRS = 4000  # the bounded walk for nested repositories: at most this many directories ...
WALK_DEPTH = 8  # ... and this deep below each writable root
_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18


def find_protected(roots: list[str]) -> list[str]:
    """Every ``.git`` (directory or gitfile) and ``.openheim`` under ``roots``: nested repositories and submodules
    included, within WALK_DIRS directories and WALK_DEPTH levels; links are not followed."""
    found: list[str] = []
    budget = WALK_DIRS
    queue = [(root, 0) for root in roots]
    while queue and budget > 0:
        path, depth = queue.pop(0)
        budget -= 1
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue
        for entry in entries:
            if entry.name in PROTECTED:
                found.append(entry.path)
            elif depth < WALK_DEPTH and entry.is_dir(follow_symlinks=False):
                queue.append((entry.path, depth + 1))
    return found


def _mount(source: bytes | None, target: str, fstype: bytes | None, flags: int, data: bytes | None = None) -> bool:
    return libc.mount(source, os.fsencode(target), fstype, ctypes.c_ulong(flags), data) == 0


def enter_namespace() -> None:
    """A private mount namespace (in a user namespace when not root), its mounts no longer shared."""
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(ctypes.c_int(_CLONE_NEWNS if uid == 0 else _CLONE_NEWNS | _CLONE_NEWUSER)):
        raise fail("mount namespace (unshare)")
    if uid != 0:
        write_file("/proc/self/setgroups", "deny")
        write_file("/proc/self/uid_map", f"{uid} {uid} 1")
        write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    if not _mount(None, "/", None, _MS_REC | _MS_PRIVATE):
        raise fail("mount namespace (private mounts)")


def read_only(paths: list[str]) -> None:
    """Bind each path over itself, read-only (``paths`` exist; a gitfile is bound like a directory)."""
    for path in paths:
        raw = os.fsencode(path)
        if not _mount(raw, path, None, _MS_BIND | _MS_REC) or not _mount(
            None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        ):
            raise fail(f"read-only {path}")


def hide(paths: list[str]) -> None:
    """An empty read-only tmpfs over each directory, ``/dev/null`` over each file."""
    for path in paths:
        if os.path.isdir(path):
            ok = _mount(b"tmpfs", path, b"tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, b"size=4k")
        elif os.path.exists(path):
            ok = _mount(b"/dev/null", path, None, _MS_BIND)
        else:
            continue
        if not ok:
            raise fail(f"hiding {path}")


def private_ptys() -> bool:
    """A new devpts instance over /dev/pts (and its ptmx over /dev/ptmx): the terminals of other sessions are
    not there to open. False when the kernel refused (the caller then grants no /dev/pts)."""
    if not _mount(b"devpts", "/dev/pts", b"devpts", _MS_NOSUID | _MS_NOEXEC, b"newinstance,ptmxmode=0666,mode=620"):
        return False
    return _mount(b"/dev/pts/ptmx", "/dev/ptmx", None, _MS_BIND)
