"""The seccomp filter: escapes refused in every mode, sockets by family, terminal injection, namespaces.

Refused with EPERM: ``DENIED`` (debugging other processes, io_uring, mounts and namespaces, kernel modules, BPF,
keys, file handles); ``clone`` with a namespace flag; ``ioctl`` TIOCSTI and TIOCLINUX (typing into a terminal);
``socket()`` of every family but AF_UNIX without network. ``socket(AF_UNIX)`` fails with EAFNOSUPPORT when named
sockets are closed and Landlock cannot check their paths (``socketpair`` stays: pipes and IPC keep working).
``clone3`` fails with ENOSYS (its flags are behind a pointer the filter cannot read; libc falls back to ``clone``).
"""

from __future__ import annotations

import ctypes
import errno
import struct

from openheim.sandbox.kernel import PR_SET_SECCOMP, Unenforced, fail, libc, machine, no_new_privs

_SECCOMP_MODE_FILTER = 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_ABS_W, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_ARCH = {"x86_64": 0xC000003E}
_X32_BIT = 0x40000000
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_NR = {"x86_64": {"socket": 41, "clone": 56, "clone3": 435, "ioctl": 16}}
_ARG0, _ARG1 = 16, 24  # offsets of the low 32 bits of args[0] and args[1] (little endian)
DENIED = {
    "x86_64": {
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "unshare": 272,
        "setns": 308,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "bpf": 321,
        "perf_event_open": 298,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "userfaultfd": 323,
        "open_by_handle_at": 304,
        "name_to_handle_at": 303,
        "acct": 163,
        "swapon": 167,
        "swapoff": 168,
        "reboot": 169,
        "quotactl": 179,
        "sethostname": 170,
        "setdomainname": 171,
    }
}

Op = tuple  # (code, jt, jf, k) with jt/jf either offsets or label names


def _socket_rule(network: bool, unix: bool) -> list[Op]:
    """At label "socket", args[0] (the family) loaded: allow or refuse."""
    ops: list[Op] = [(_JEQ_K, "unix", 0, _AF_UNIX)]
    if network:
        ops += [("ret", _RET_ALLOW)]
    else:
        ops += [("ret", _RET_ERRNO | errno.EPERM)]
    # EAFNOSUPPORT, as a kernel without Unix sockets answers: programs cope, and the tool result can name it
    ops += [("label", "unix"), ("ret", _RET_ALLOW if unix else _RET_ERRNO | errno.EAFNOSUPPORT)]
    return ops


def _rules(network: bool, unix: bool, nr: dict[str, int], denied: dict[str, int]) -> list[Op]:
    ops: list[Op] = [(_LD_ABS_W, 0, 0, 0), (_JGE_K, "refuse", 0, _X32_BIT)]
    for number in sorted(denied.values()):
        ops.append((_JEQ_K, "refuse", 0, number))
    ops += [
        (_JEQ_K, "enosys", 0, nr["clone3"]),
        (_JEQ_K, "clone", 0, nr["clone"]),
        (_JEQ_K, "ioctl", 0, nr["ioctl"]),
        (_JEQ_K, "socket", 0, nr["socket"]),
        ("ret", _RET_ALLOW),
        ("label", "clone"),
        (_LD_ABS_W, 0, 0, _ARG0),
        (_JSET_K, "refuse", 0, _CLONE_NAMESPACES),
        ("ret", _RET_ALLOW),
        ("label", "ioctl"),
        (_LD_ABS_W, 0, 0, _ARG1),
        (_JEQ_K, "refuse", 0, _TIOCSTI),
        (_JEQ_K, "refuse", 0, _TIOCLINUX),
        ("ret", _RET_ALLOW),
        ("label", "socket"),
        (_LD_ABS_W, 0, 0, _ARG0),
        *_socket_rule(network, unix),
        ("label", "enosys"),
        ("ret", _RET_ERRNO | errno.ENOSYS),
        ("label", "refuse"),
        ("ret", _RET_ERRNO | errno.EPERM),
    ]
    return ops


def _assemble(ops: list[Op]) -> bytes:
    """BPF bytes from ``ops``; a jump names a label, resolved to the offset from the next instruction."""
    code: list[tuple] = []
    labels: dict[str, int] = {}
    for op in ops:
        if op[0] == "label":
            labels[op[1]] = len(code)
        elif op[0] == "ret":
            code.append((_RET_K, 0, 0, op[1]))
        else:
            code.append(op)
    out = []
    for i, (c, jt, jf, k) in enumerate(code):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        out.append(struct.pack("=HBBI", c, jt, jf, k))
    return b"".join(out)


def seccomp_program(network: bool, unix: bool = True, arch_name: str = machine) -> bytes:
    """The BPF filter as bytes (``unix``: whether ``socket(AF_UNIX)`` is allowed)."""
    arch, denied, nr = _ARCH.get(arch_name), DENIED.get(arch_name), _NR.get(arch_name)
    if arch is None or denied is None or nr is None:
        raise Unenforced(f"seccomp: no filter for {arch_name}")
    head: list[Op] = [(_LD_ABS_W, 0, 0, 4), (_JEQ_K, 1, 0, arch), ("ret", _RET_ERRNO | errno.EPERM)]
    return _assemble(head + _rules(network, unix, nr, denied))


def apply_seccomp(network: bool, unix: bool = True) -> None:
    program = seccomp_program(network, unix)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(buffer))
    no_new_privs()
    zero = ctypes.c_ulong(0)
    if libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(_SECCOMP_MODE_FILTER), fprog, zero, zero):
        raise fail("seccomp filter")
