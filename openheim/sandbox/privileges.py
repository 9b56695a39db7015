"""What a command keeps of its starter: no capabilities (root is not special), no controlling terminal, and the
``[sandbox] limits`` on memory, file size, processes and CPU time."""

from __future__ import annotations

import ctypes
import os
import resource
import struct

from openheim.sandbox.kernel import PR_CAP_AMBIENT, PR_CAPBSET_DROP, PR_CAPBSET_READ, fail, libc, prctl, write_file

_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_VERSION_3 = 0x20080522
# Defaults that stop a fork bomb or a disk filler and leave room for a normal build (docs/security.md).
DEFAULT_LIMITS = {"processes": 1024, "file_size_mb": 8192, "address_space_mb": 0, "cpu_secs": 0}
_PIDS_BASES = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")  # cgroup v1's pids hierarchy, or a v2 root
_RLIMITS = {
    "address_space_mb": (resource.RLIMIT_AS, 1 << 20),
    "file_size_mb": (resource.RLIMIT_FSIZE, 1 << 20),
    "processes": (resource.RLIMIT_NPROC, 1),
    "cpu_secs": (resource.RLIMIT_CPU, 1),
}


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 63


def drop_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets: an exec as root regains none."""
    for cap in range(_last_cap() + 1):
        if libc.prctl(ctypes.c_int(PR_CAPBSET_READ), ctypes.c_ulong(cap), 0, 0, 0) != 1:
            continue  # not in the set (already dropped: a helper inside a sandbox), or no such capability
        if not prctl(PR_CAPBSET_DROP, cap):
            if os.geteuid() != 0:
                break  # a user without CAP_SETPCAP: nothing to gain from the set under no_new_privs
            raise fail("capabilities (bounding set)")
    prctl(PR_CAP_AMBIENT, _CAP_AMBIENT_CLEAR_ALL)
    header = ctypes.create_string_buffer(struct.pack("=Ii", _CAP_VERSION_3, 0), 8)
    data = ctypes.create_string_buffer(24)  # two zeroed {effective, permitted, inheritable}
    if libc.capset(header, data):
        raise fail("capabilities (capset)")


def _count_tasks(uid: int) -> int:
    """Processes of ``uid`` now (RLIMIT_NPROC counts them all, not only the command's)."""
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                count += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                pass
    return count


def process_limit(limits: dict[str, int]) -> int:
    return {**DEFAULT_LIMITS, **limits}["processes"]


def join_pids_cgroup(name: str, limit: int) -> bool:
    """Move this process into a new pids cgroup ``name`` holding at most ``limit`` processes (root only: uid 0
    is exempt from RLIMIT_NPROC). False when there is no writable pids controller."""
    for base in _PIDS_BASES:
        path = os.path.join(base, name)
        try:
            os.mkdir(path, 0o755)
        except OSError:
            continue
        try:
            write_file(os.path.join(path, "pids.max"), str(limit))
            write_file(os.path.join(path, "cgroup.procs"), "0")
            return True
        except OSError:
            _rmdir(path)
    return False


def _rmdir(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass  # still in use


def set_pids_max(name: str, limit: int) -> None:
    for base in _PIDS_BASES:
        try:
            write_file(os.path.join(base, name, "pids.max"), str(limit) if limit else "max")
            return
        except OSError:
            continue


def remove_pids_cgroups(prefix: str, leave: bool = False) -> None:
    """Remove the cgroups whose names start with ``prefix`` and whose owner (the pid ending the name) has ended;
    ``leave``: this process moves out first (its own cgroup goes too once its commands have ended)."""
    for base in _PIDS_BASES:
        try:
            names = [n for n in os.listdir(base) if n.startswith(prefix)]
        except OSError:
            continue
        if leave:
            try:
                write_file(os.path.join(base, "cgroup.procs"), "0")
            except OSError:
                pass
        for name in names:
            if leave or not os.path.exists(f"/proc/{name.rsplit('-', 1)[-1]}"):
                _rmdir(os.path.join(base, name))


def set_limits(limits: dict[str, int], in_cgroup: bool = False) -> list[str]:
    """Apply ``limits`` over DEFAULT_LIMITS (0: none); what could not be applied, as report lines.
    ``in_cgroup``: the process count is already capped by a pids cgroup."""
    missing = []
    for name, value in {**DEFAULT_LIMITS, **limits}.items():
        if not value or name not in _RLIMITS or (name == "processes" and in_cgroup):
            continue
        which, unit = _RLIMITS[name]
        amount = value * unit
        if name == "processes":
            if os.geteuid() == 0:
                missing.append("process limit: not enforced (root is exempt from RLIMIT_NPROC; no pids cgroup)")
                continue
            amount += _count_tasks(os.geteuid())
        try:
            resource.setrlimit(which, (amount, amount))
        except (OSError, ValueError) as e:
            missing.append(f"limit {name}: {e}")
    return missing


def leave_terminal() -> bool:
    """Start a new session (no controlling terminal); False when this process already leads a group (the
    command is then started with its own session)."""
    if os.getsid(0) == os.getpid():
        return True
    try:
        os.setsid()
        return True
    except OSError:
        return False
