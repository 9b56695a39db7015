"""The few kernel calls the sandbox helper makes through libc (standard library only: the helper runs as
``python -I -S``), and how a layer the kernel refused is reported."""

from __future__ import annotations

import ctypes
import os

PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_READ, PR_CAPBSET_DROP = 1, 22, 23, 24
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 36, 38, 47

libc = ctypes.CDLL(None, use_errno=True)
machine = os.uname().machine


class Unenforced(Exception):
    """One part of the sandbox the kernel did not apply; the message says which and why."""


def fail(what: str) -> Unenforced:
    err = ctypes.get_errno()
    return Unenforced(f"{what}: {os.strerror(err) if err else 'unsupported'}")


def prctl(option: int, arg: int = 0, arg2: int = 0) -> bool:
    zero = ctypes.c_ulong(0)
    return libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(arg2), zero, zero) == 0


def no_new_privs() -> None:
    if not prctl(PR_SET_NO_NEW_PRIVS, 1):
        raise fail("no_new_privs")


def write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
