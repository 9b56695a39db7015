"""The sandbox helper: restrict this process in the kernel, run one command as its child, kill what it leaves.

Started as ``python -I -S -c "...helper.main()" OPTIONS -- CMD...`` (or ``openheim sandbox exec OPTIONS --
CMD...`` in the frozen binary), so it imports only the standard library and ``openheim.core.signals`` and runs
single-threaded, as Landlock, seccomp and unshare require. In order it: keeps ``.git``/``.openheim``
read-only with bind mounts in a private mount namespace, sets no_new_privs, applies Landlock (file system;
TCP and scopes where the ABI has them), installs a seccomp filter (no AF_INET/AF_INET6 sockets when the
network is off; no ptrace, io_uring, mount, ...), becomes a child subreaper, then forks and execs the
command. When the command ends, or this helper gets SIGTERM/SIGHUP/SIGINT, every descendant (``setsid``,
double forks, ``nohup``) is killed.

``--probe`` applies everything and prints what was enforced as one JSON object instead of running a command.
Exit codes: the command's own (a signal is re-raised); 125 when ``--required`` and something is not enforced.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
import time

from openheim.core.signals import SignalRoute, ignore, restore_defaults

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs every command
if TYPE_CHECKING:
    import signal
else:
    import _signal as signal  # not signal: its enum import costs milliseconds per command

REFUSED = 125  # --required and the kernel cannot enforce the mode: nothing was run

# --- Landlock -------------------------------------------------------------------------------------
_SYS = {"x86_64": {"create": 444, "add": 445, "restrict": 446}, "aarch64": {"create": 444, "add": 445, "restrict": 446}}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_WRITE = _WRITE_FILE | _TRUNCATE
_DIR_WRITE = (
    _WRITE_FILE
    | _REMOVE_DIR
    | _REMOVE_FILE
    | _MAKE_CHAR
    | _MAKE_DIR
    | _MAKE_REG
    | _MAKE_SOCK
    | _MAKE_FIFO
    | _MAKE_BLOCK
    | _MAKE_SYM
    | _REFER
    | _TRUNCATE
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts")

# --- prctl and seccomp ----------------------------------------------------------------------------
_PR_SET_PDEATHSIG, _PR_SET_SECCOMP, _PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 1, 22, 36, 38
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_ABS_W, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ARCH = {"x86_64": 0xC000003E}
_X32_BIT = 0x40000000
_SOCKET = {"x86_64": 41}
# Escapes refused in every mode: debugging other processes, io_uring (sockets and files without the
# syscalls this filter sees), changing mounts and namespaces, kernel modules, BPF, keys, file handles.
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
    }
}

# --- mounts ---------------------------------------------------------------------------------------
_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18

_libc = ctypes.CDLL(None, use_errno=True)
_machine = os.uname().machine


class Unenforced(Exception):
    """One part of the sandbox the kernel did not apply; the message says which and why."""


def _fail(what: str) -> Unenforced:
    err = ctypes.get_errno()
    return Unenforced(f"{what}: {os.strerror(err) if err else 'unsupported'}")


def _prctl(option: int, arg: int = 0) -> bool:
    zero = ctypes.c_ulong(0)
    return _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), zero, zero, zero) == 0


def _syscall(name: str, *args: object) -> int:
    numbers = _SYS.get(_machine)
    if numbers is None:
        return -1
    return int(_libc.syscall(ctypes.c_long(numbers[name]), *args))


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
    return handled


def _add_path(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist needs no rule
    try:
        if not os.path.isdir(path):
            access &= _READ_FILE | _EXECUTE | _FILE_WRITE
        attr = struct.pack("=Qi", access, fd)
        if _syscall("add", ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), attr, ctypes.c_uint32(0)):
            raise _fail(f"Landlock rule for {path}")
    finally:
        os.close(fd)


def apply_landlock(writable: list[str], network: bool) -> dict:
    """Read and execute everywhere, write only under ``writable`` and to a few devices; TCP and scopes by ABI."""
    abi = landlock_abi()
    if abi < 1:
        raise Unenforced("Landlock: not offered by this kernel")
    handled_fs = _fs_rights(abi)
    handled_net = 0 if network or abi < 4 else _NET_BIND_TCP | _NET_CONNECT_TCP
    scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", handled_fs, handled_net, scoped)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _syscall("create", attr[:size], ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise _fail("Landlock ruleset")
    try:
        _add_path(ruleset, "/", _READ)
        for device in DEVICES:
            _add_path(ruleset, device, _READ | _DIR_WRITE)
        for path in writable:
            _add_path(ruleset, path, (_READ | _DIR_WRITE) & handled_fs)
        if not _prctl(_PR_SET_NO_NEW_PRIVS, 1):
            raise _fail("no_new_privs")
        if _syscall("restrict", ctypes.c_int(ruleset), ctypes.c_uint32(0)):
            raise _fail("Landlock restrict_self")
    finally:
        os.close(ruleset)
    return {"landlock_abi": abi, "tcp": bool(handled_net), "scoped": bool(scoped)}


def seccomp_program(network: bool, machine: str = _machine) -> bytes:
    """The BPF filter as bytes: refuse ``DENIED`` (and AF_INET/AF_INET6 sockets without network) with EPERM."""
    arch, denied = _ARCH.get(machine), DENIED.get(machine)
    if arch is None or denied is None:
        raise Unenforced(f"seccomp: no filter for {machine}")
    refuse = _RET_ERRNO | errno.EPERM
    ops: list[tuple[int, int, int, int]] = [
        (_LD_ABS_W, 0, 0, 4),
        (_JEQ_K, 1, 0, arch),
        (_RET_K, 0, 0, refuse),  # another ABI (i386): refused
        (_LD_ABS_W, 0, 0, 0),
        (_JGE_K, 0, 1, _X32_BIT),
        (_RET_K, 0, 0, refuse),  # x32 numbers: refused
    ]
    for number in sorted(denied.values()):
        ops += [(_JEQ_K, 0, 1, number), (_RET_K, 0, 0, refuse)]
    if not network:
        ops += [
            (_JEQ_K, 0, 4, _SOCKET[machine]),
            (_LD_ABS_W, 0, 0, 16),
            (_JEQ_K, 1, 0, 2),
            (_JEQ_K, 0, 1, 10),
            (_RET_K, 0, 0, refuse),
        ]
    ops.append((_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(struct.pack("=HBBI", *op) for op in ops)


def apply_seccomp(network: bool) -> None:
    program = seccomp_program(network)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("=HxxxxxxQ", len(program) // 8, ctypes.addressof(buffer))
    if not _prctl(_PR_SET_NO_NEW_PRIVS, 1):
        raise _fail("no_new_privs")
    zero = ctypes.c_ulong(0)
    if _libc.prctl(ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(_SECCOMP_MODE_FILTER), fprog, zero, zero):
        raise _fail("seccomp filter")


def _write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def protect_read_only(paths: list[str]) -> None:
    """Bind-mount each existing path read-only in a private mount namespace (a user namespace when not root)."""
    paths = [p for p in paths if os.path.exists(p)]
    if not paths:
        return
    uid, gid = os.geteuid(), os.getegid()
    if _libc.unshare(ctypes.c_int(_CLONE_NEWNS if uid == 0 else _CLONE_NEWNS | _CLONE_NEWUSER)):
        raise _fail("read-only .git/.openheim (mount namespace)")
    if uid != 0:
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    if _libc.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None):
        raise _fail("read-only .git/.openheim (private mounts)")
    for path in paths:
        raw = os.fsencode(path)
        if _libc.mount(raw, raw, None, ctypes.c_ulong(_MS_BIND | _MS_REC), None) or _libc.mount(
            None, raw, None, ctypes.c_ulong(_MS_REMOUNT | _MS_BIND | _MS_RDONLY), None
        ):
            raise _fail(f"read-only {path}")


# --- descendants ----------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def kill_descendants() -> None:
    """SIGKILL every descendant: orphans (setsid, double forks) were reparented here (we are the subreaper)."""
    me = os.getpid()
    for _ in range(10000):
        children = _children(me)
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reaped = _reap()
        if not children and not reaped:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                time.sleep(0.001)


def _reap() -> bool:
    reaped = False
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped = True


class _Stop(Exception):
    def __init__(self, signum: int) -> None:
        self.signum = signum


def _on_signal(signum: int) -> None:
    raise _Stop(signum)


# --- options --------------------------------------------------------------------------------------


class Options:
    def __init__(self) -> None:
        self.mode = "workspace-write"
        self.network = False
        self.required = False
        self.probe = False
        self.writable: list[str] = []
        self.protect: list[str] = []
        self.parent = 0
        self.tmp = ""
        self.command: list[str] = []


def parse(argv: list[str]) -> Options:
    opts = Options()
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--":
            opts.command = args
            break
        if arg in ("--mode", "--write", "--protect", "--parent", "--tmp") and args:
            value = args.pop(0)
            if arg == "--mode":
                opts.mode = value
            elif arg == "--tmp":
                opts.tmp = value
            elif arg == "--write":
                opts.writable.append(value)
            elif arg == "--protect":
                opts.protect.append(value)
            else:
                opts.parent = int(value)
        elif arg in ("--network", "--required", "--probe"):
            setattr(opts, arg[2:], True)
        else:
            raise SystemExit(
                f"openheim sandbox exec: unknown option {arg!r}; usage: openheim sandbox exec "
                "[--mode read-only|workspace-write] [--network] [--write DIR]... [--protect DIR]... "
                "[--tmp DIR] "
                "[--required] -- COMMAND..."
            )
    if opts.mode not in ("read-only", "workspace-write"):
        raise SystemExit(f"openheim sandbox exec: unknown mode {opts.mode!r}; use read-only or workspace-write")
    if not opts.command and not opts.probe:
        raise SystemExit("openheim sandbox exec: no command given after --")
    return opts


def _command_env(tmp: str) -> dict[str, str]:
    env = dict(os.environ)
    # The bootloader's own variables must not reach the command. A helper started by the frozen binary has
    # them; the fork server's children already got the clean environment openheim sent (nothing to undo).
    touched = any(n.startswith("_PYI_") or n in ("_MEIPASS2", "LD_LIBRARY_PATH_ORIG") for n in env)
    if getattr(sys, "frozen", False) and touched:
        original = env.pop("LD_LIBRARY_PATH_ORIG", None)
        env.pop("LD_LIBRARY_PATH", None)
        if original is not None:
            env["LD_LIBRARY_PATH"] = original
        for name in [n for n in env if n.startswith("_PYI_") or n == "_MEIPASS2"]:
            del env[name]
    if tmp:
        env["TMPDIR"] = tmp
    return env


def restrict(opts: Options, tmp: str) -> dict:
    """Apply every layer it can; a report of what is enforced and what is not (with the reason)."""
    report: dict = {
        "mode": opts.mode,
        "network": opts.network,
        "landlock_abi": 0,
        "filesystem": False,
        "protected": False,
        "tcp": False,
        "udp": False,
        "scoped": False,
        "seccomp": False,
        "not_enforced": [],
    }
    writable = ([tmp] if tmp else []) + (opts.writable if opts.mode == "workspace-write" else [])
    try:
        if opts.mode == "workspace-write":
            protect_read_only(opts.protect)
        report["protected"] = True
    except Unenforced as e:
        report["not_enforced"].append(str(e))
    try:
        report.update(apply_landlock(writable, opts.network), filesystem=True)
    except Unenforced as e:
        report["not_enforced"].append(str(e))
    try:
        apply_seccomp(opts.network)
        report["seccomp"] = True
    except Unenforced as e:
        report["not_enforced"].append(str(e))
    report["udp"] = report["seccomp"] and not opts.network
    report["tcp"] = report["tcp"] or report["udp"]
    return report


def _finish(status: int) -> int:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            restore_defaults(sig)
        sys.stdout.flush()
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


def _run(opts: Options, env: dict[str, str]) -> int:
    """Start the command (posix_spawn: no copy of this process) and reap orphans handed to us until it ends."""
    try:
        pid = os.posix_spawnp(
            opts.command[0], opts.command, env, setsigdef=(signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE)
        )
    except OSError as e:
        os.write(2, f"openheim sandbox: cannot run {opts.command[0]}: {e.strerror}\n".encode())
        return 127 << 8
    while True:
        done, status = os.waitpid(-1, 0)
        if done == pid:
            return status


def run_restricted(opts: Options) -> int:
    """Restrict this process, run the command as a child, kill what it leaves; its wait status (or an exit code
    shifted into one: REFUSED, 128+signal when we were stopped)."""
    report = restrict(opts, opts.tmp)
    if opts.required and report["not_enforced"]:
        sys.stderr.write(f"openheim sandbox: required but not enforced: {'; '.join(report['not_enforced'])}\n")
        return REFUSED << 8
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    SignalRoute(_on_signal, (signal.SIGTERM, signal.SIGHUP, signal.SIGINT))  # for the helper's whole life
    try:
        return _run(opts, _command_env(opts.tmp))
    except _Stop as stop:
        return (128 + stop.signum) << 8
    finally:
        kill_descendants()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--serve"]:
        return serve(int(argv[1]))
    opts = parse(argv)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if opts.parent and os.getppid() != opts.parent:
        return REFUSED  # openheim ended before we started
    if opts.probe:
        import json

        sys.stdout.write(json.dumps(restrict(opts, opts.tmp)) + "\n")
        return 0
    return _finish(run_restricted(opts))


# --- fork server ----------------------------------------------------------------------------------
# Starting Python costs ~10 ms; openheim keeps one unrestricted, single-threaded server per process instead.
# For each command it sends a SOCK_SEQPACKET socket over the control socket; the server forks a child for it,
# which reads {"argv", "cwd", "env"} with the command's stdin/stdout/stderr, starts its own session, answers
# {"pid"}, restricts itself and runs the command as above, answers {"status"}, and waits for openheim to close
# the socket before it exits (so its pid stays valid as long as openheim may signal it).


def serve(control_fd: int) -> int:
    import json  # noqa: F401  (imported once here, not in every forked child)
    import socket

    control = socket.socket(fileno=control_fd)
    ignore(signal.SIGCHLD)  # request children are reaped by the kernel
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(control, 16, 1)
        except OSError:
            return 0
        if not msg:
            return 0  # openheim closed its end: it has ended
        if not fds:
            continue
        pid = os.fork()
        if pid == 0:
            control.close()
            restore_defaults(signal.SIGCHLD)
            code = 1
            try:
                code = _serve_one(fds[0])
            finally:
                os._exit(code)
        os.close(fds[0])


def _serve_one(conn_fd: int) -> int:
    import json
    import socket

    conn = socket.socket(fileno=conn_fd)
    msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
    request = json.loads(msg)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.setsid()
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)  # the server ended (openheim did): stop and clean up
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    conn.send(json.dumps({"pid": os.getpid()}).encode())
    try:
        status = run_restricted(parse(request["argv"]))
    except SystemExit as e:  # bad options
        os.write(2, f"{e}\n".encode())
        status = 2 << 8
    conn.send(json.dumps({"status": status}).encode())
    conn.recv(1)  # until openheim closes the socket
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
