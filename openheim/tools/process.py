"""Child processes of tools: the registry of running process groups and the child environment."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from openheim.core.child_env import child_environ

if TYPE_CHECKING:
    import ctypes

_lock = threading.Lock()
_groups: set[int] = set()
_helpers: set[int] = set()  # groups led by a sandbox helper (it cleans up after SIGTERM)


def register_group(pgid: int, helper: bool = False) -> None:
    """Remember a running process group so kill_all can reach it."""
    with _lock:
        _groups.add(pgid)
        if helper:
            _helpers.add(pgid)


def unregister_group(pgid: int) -> None:
    with _lock:
        _groups.discard(pgid)
        _helpers.discard(pgid)


def running_groups() -> list[int]:
    with _lock:
        return sorted(_groups)


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group; a group that is already gone is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


STOP_GRACE = 0.3  # seconds a sandbox helper gets to kill what its command left behind


def kill_all() -> None:
    """Kill every running tool process group (for the CLI's SIGTERM/SIGHUP handler).

    A sandbox helper (the leader of its group) gets SIGTERM first: it then kills its command's descendants,
    also those that left the group with setsid, before the groups are SIGKILLed."""
    groups = running_groups()
    with _lock:
        helpers = sorted(_helpers)
    for pid in helpers:
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    if helpers:
        import time

        time.sleep(STOP_GRACE)
    for pgid in groups:
        kill_group(pgid)


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal 77`` for a number with no name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4


@functools.cache
def libc() -> ctypes.CDLL | None:
    """The C library through ctypes on Linux (loaded once: a forked child must not dlopen), else None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _prctl(option: int, value: int) -> bool:
    """prctl(2); False where there is none or it failed."""
    lib = libc()
    if lib is None or not hasattr(lib, "prctl"):
        return False
    import ctypes

    zero = ctypes.c_ulong(0)
    return lib.prctl(ctypes.c_int(option), ctypes.c_ulong(value), zero, zero, zero) == 0


def deny_inspection() -> bool:
    """Make this process's memory and environment unreadable to its children (Linux).

    Tools start children (shells, ripgrep, MCP servers) as the same user; a same-user process may
    otherwise read ``/proc/<openheim>/environ`` and ``/proc/<openheim>/mem``, which hold provider
    keys. PR_SET_DUMPABLE 0 makes those files root's and refuses ptrace; it is inherited by fork and
    reset by exec, so the children themselves stay ordinary. Also disables core dumps.
    """
    return _prctl(_PR_SET_DUMPABLE, 0)


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """In a forked child: receive ``sig`` when the thread that forked it ends (Linux)."""
    return _prctl(_PR_SET_PDEATHSIG, sig)


def child_env(secret_names: Iterable[str] = (), base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The user's environment minus openheim's secrets and a frozen binary's own variables (see core.child_env)."""
    return child_environ(base, secrets=secret_names)
