"""Landlock: read and execute everywhere, write only under the writable roots (never device nodes), named Unix
sockets only where allowed (ABI 9), TCP and scopes where the ABI has them."""

from __future__ import annotations

import ctypes
import os
import struct

from openheim.sandbox.kernel import Unenforced, fail, libc, machine, no_new_privs

_SYS = {"x86_64": {"create": 444, "add": 445, "restrict": 446}, "aarch64": {"create": 444, "add": 445, "restrict": 446}}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
_REFER, _TRUNCATE = 1 << 13, 1 << 14
RESOLVE_UNIX = 1 << 16  # ABI 9: connect()/sendmsg() to a named Unix socket
UNIX_ABI = 9
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_WRITE = _WRITE_FILE | _TRUNCATE
# MAKE_CHAR and MAKE_BLOCK are handled and granted nowhere: a device node made under a root would bypass
# every path rule (root could make one before capabilities were dropped too).
_DIR_WRITE = (
    _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_DIR | _MAKE_REG | _MAKE_SOCK | _MAKE_FIFO | _MAKE_SYM
) | (_REFER | _TRUNCATE)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx")


def _syscall(name: str, *args: object) -> int:
    numbers = _SYS.get(machine)
    if numbers is None:
        return -1
    return int(libc.syscall(ctypes.c_long(numbers[name]), *args))


def landlock_abi() -> int:
    """The highest Landlock ABI the kernel offers; 0 when it has none (or it is disabled)."""
    abi = _syscall("create", None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(abi, 0)


def _fs_rights(abi: int) -> int:
    handled = (1 << 13) - 1
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    if abi >= UNIX_ABI:
        handled |= RESOLVE_UNIX
    return handled


def _add_path(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist needs no rule
    try:
        if not os.path.isdir(path):
            access &= _READ_FILE | _EXECUTE | _FILE_WRITE | RESOLVE_UNIX
        attr = struct.pack("=Qi", access, fd)
        if _syscall("add", ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), attr, ctypes.c_uint32(0)):
            raise fail(f"Landlock rule for {path}")
    finally:
        os.close(fd)


def _add_writable(ruleset: int, root: str, protected: list[str], access: int) -> None:
    """Write under ``root`` except beneath ``protected`` (the fallback when no mount namespace keeps them
    read-only): ``root`` itself stays read-only, each entry not leading to a protected path is granted."""
    inside = [p for p in protected if p.startswith(root.rstrip("/") + "/")]
    if not inside:
        _add_path(ruleset, root, access)
        return
    try:
        entries = [e.path for e in os.scandir(root) if not e.is_symlink()]  # a link needs no rule: its target does
    except OSError:
        return
    for path in entries:
        if path in inside:
            continue
        _add_writable(ruleset, path, inside, access)


def apply_landlock(
    writable: list[str],
    network: bool,
    devpts: bool = False,
    sockets: list[str] | None = None,
    exclude: list[str] | None = None,
) -> dict:
    """Restrict this process: read and execute everywhere, write only under ``writable`` (minus ``exclude``) and
    to a few devices (``/dev/pts`` when it is a private instance); named Unix sockets only at ``sockets`` (ABI 9,
    None: every one); no TCP without ``network`` (ABI 4); no signals or abstract sockets out (ABI 6)."""
    abi = landlock_abi()
    if abi < 1:
        raise Unenforced("Landlock: not offered by this kernel")
    handled_fs = _fs_rights(abi) if sockets is not None else _fs_rights(abi) & ~RESOLVE_UNIX
    handled_net = 0 if network or abi < 4 else _NET_BIND_TCP | _NET_CONNECT_TCP
    scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", handled_fs, handled_net, scoped)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _syscall("create", attr[:size], ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise fail("Landlock ruleset")
    try:
        _add_path(ruleset, "/", _READ)
        for device in DEVICES + (("/dev/pts",) if devpts else ()):
            _add_path(ruleset, device, (_READ | _DIR_WRITE) & handled_fs)
        for path in writable:
            _add_writable(ruleset, path, exclude or [], (_READ | _DIR_WRITE) & handled_fs)
        for path in sockets or []:
            _add_path(ruleset, path, RESOLVE_UNIX & handled_fs)
        no_new_privs()
        if _syscall("restrict", ctypes.c_int(ruleset), ctypes.c_uint32(0)):
            raise fail("Landlock restrict_self")
    finally:
        os.close(ruleset)
    return {"landlock_abi": abi, "tcp": bool(handled_net), "scoped": bool(scoped), "unix_paths": abi >= UNIX_ABI}
