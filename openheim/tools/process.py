"""Child processes of tools: the registry of running process groups and the child environment."""
from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterable, Mapping

_lock = threading.Lock()
_groups: set[int] = set()


def register_group(pgid: int) -> None:
    """Remember a running process group so kill_all can reach it."""
    with _lock:
        _groups.add(pgid)


def unregister_group(pgid: int) -> None:
    with _lock:
        _groups.discard(pgid)


def running_groups() -> list[int]:
    with _lock:
        return sorted(_groups)


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group; a group that is already gone is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> None:
    """Kill every running tool process group (for the CLI's SIGTERM/SIGHUP handler)."""
    for pgid in running_groups():
        kill_group(pgid)


def child_env(secret_names: Iterable[str] = (), base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The user's environment minus openheim's secrets and a frozen binary's own variables.

    A frozen openheim's bootloader sets LD_LIBRARY_PATH and ``_PYI_*`` variables; a child that kept
    them would load our bundled libraries, and a second frozen openheim started from it would refuse
    to run ("unexpected name of application's home directory").
    """
    env = dict(os.environ if base is None else base)
    for name in secret_names:
        env.pop(name, None)
    if getattr(sys, "frozen", False):
        original = env.pop("LD_LIBRARY_PATH_ORIG", None)
        if original is not None:
            env["LD_LIBRARY_PATH"] = original
        else:
            env.pop("LD_LIBRARY_PATH", None)
        for name in [n for n in env if n.startswith("_PYI_") or n == "_MEIPASS2"]:
            del env[name]
    return env
