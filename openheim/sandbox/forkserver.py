"""The fork server's side (see server.py for openheim's): one unrestricted, single-threaded helper per openheim
process; for each command openheim sends a SOCK_SEQPACKET socket over the control socket, the server forks a
child for it, which reads {"argv", "cwd", "env"} with the command's stdin/stdout/stderr, starts its own session,
answers {"pid"}, restricts itself and runs the command (helper.run_restricted), answers {"status",
"not_enforced"}, and waits for openheim to close the socket before it exits (so its pid stays valid as long as
openheim may signal it). Every descriptor received is close-on-exec: the command inherits only 0, 1 and 2."""

from __future__ import annotations

import json
import os
import socket

from openheim.core.signals import ignore, restore_defaults
from openheim.sandbox import helper, privileges
from openheim.sandbox.kernel import PR_SET_PDEATHSIG, prctl

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:
    import _signal as signal

_REQUEST = 1 << 20


def serve(control_fd: int) -> int:
    control = socket.socket(fileno=control_fd)
    ignore(signal.SIGCHLD)  # request children are reaped by the kernel
    cgroup = _pids_cgroup()
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(control, 16, 1, socket.MSG_CMSG_CLOEXEC)
        except OSError:
            return 0
        if not msg:
            if cgroup:
                privileges.remove_pids_cgroups(_cgroup_name(), leave=True)
            return 0  # openheim closed its end: it has ended
        if not fds:
            continue
        pid = os.fork()
        if pid == 0:
            control.close()
            restore_defaults(signal.SIGCHLD)
            code = 1
            try:
                code = _serve_one(fds[0], cgroup)
            finally:
                os._exit(code)
        os.close(fds[0])


_SERVER_PID = os.getpid()  # imported by the server process only (launch.main --serve)


def _cgroup_name() -> str:
    return f"openheim-{_SERVER_PID}"


def _pids_cgroup() -> bool:
    """As root (exempt from RLIMIT_NPROC), the server and so every command it forks joins one pids cgroup:
    joining once costs milliseconds, each command then only sets pids.max. Stale ones of ended servers go."""
    if os.geteuid() != 0:
        return False
    privileges.remove_pids_cgroups("openheim-")
    return privileges.join_pids_cgroup(_cgroup_name(), privileges.process_limit({}))


def _request(conn: socket.socket) -> dict:
    """The request and the command's stdin/stdout/stderr moved to 0, 1, 2."""
    msg, fds, _flags, _addr = socket.recv_fds(conn, _REQUEST, 3, socket.MSG_CMSG_CLOEXEC)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)  # 0, 1, 2 are inherited; the received copies are close-on-exec
        os.close(fd)
    return json.loads(msg)


def _serve_one(conn_fd: int, cgroup: bool) -> int:
    conn = socket.socket(fileno=conn_fd)
    conn.set_inheritable(False)
    request = _request(conn)
    os.setsid()
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the server ended (openheim did): stop and clean up
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    conn.send(json.dumps({"pid": os.getpid()}).encode())
    report: dict = {}
    try:
        opts = helper.parse(request["argv"])
        if cgroup:
            privileges.set_pids_max(_cgroup_name(), privileges.process_limit(opts.limits))
            opts.cgroup = True
        status = helper.run_restricted(opts, report)
    except SystemExit as e:  # bad options
        os.write(2, f"{e}\n".encode())
        status = 2 << 8
    conn.send(json.dumps({"status": status, "not_enforced": report.get("not_enforced", [])}).encode())
    conn.recv(1)  # until openheim closes the socket
    return 0
