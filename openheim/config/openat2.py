"""openat2(2) with RESOLVE_NO_SYMLINKS (and RESOLVE_BENEATH), where the kernel has it (Linux 5.6+).

One system call resolves a whole path and refuses a symlink at any component, checked by the kernel
as it opens; the sandbox's component-wise O_NOFOLLOW walk gives the same answer in one call per
component. ``available()`` is False on other systems, older kernels and where a seccomp filter
refuses the call; callers then walk. ctypes is imported on the first call only.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
SYS_OPENAT2 = 437  # the same number on every Linux architecture (new system calls share one table)
AT_FDCWD = -100

_state: dict[str, Any] = {}  # "call": the bound syscall, or None once it proved unavailable


def _syscall() -> Any:
    if "call" in _state:
        return _state["call"]
    _state["call"] = _bind() if sys.platform.startswith("linux") else None
    return _state["call"]


def _bind() -> Any:
    """The openat2 system call through libc's syscall(), or None where the kernel refuses it."""
    import ctypes

    class OpenHow(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def call(dir_fd: int, path: bytes, flags: int, mode: int, resolve: int) -> int:
        how = OpenHow(flags, mode, resolve)
        fd = libc.syscall(
            ctypes.c_long(SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(path),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), os.fsdecode(path))
        return int(fd)

    try:  # probe once: "/" always resolves; ENOSYS/EPERM mean no openat2 here
        os.close(call(AT_FDCWD, b"/", os.O_DIRECTORY | os.O_RDONLY | os.O_CLOEXEC, 0, RESOLVE_NO_SYMLINKS))
    except OSError:
        return None
    return call


def available() -> bool:
    return _syscall() is not None


def openat2(
    path: str | bytes, flags: int, mode: int = 0, *, dir_fd: int = AT_FDCWD, resolve: int = RESOLVE_NO_SYMLINKS
) -> int:
    """A descriptor of ``path`` opened with ``resolve`` (no symlink anywhere, by default).

    A symlink on the way is ELOOP; raises OSError(ENOSYS) when openat2 is not available.
    """
    call = _syscall()
    if call is None:
        raise OSError(errno.ENOSYS, "openat2 is not available")
    tmpfile = getattr(os, "O_TMPFILE", 0)
    if not flags & os.O_CREAT and not (tmpfile and flags & tmpfile == tmpfile):
        mode = 0  # the kernel refuses a mode without O_CREAT
    return int(call(dir_fd, os.fsencode(path), flags | os.O_CLOEXEC, mode, resolve | RESOLVE_NO_MAGICLINKS))
