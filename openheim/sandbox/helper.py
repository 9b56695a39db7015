"""The sandbox helper: restrict this process in the kernel, run one command as its child, kill what it leaves.

Started as ``python -I -S -c "...helper.main()" OPTIONS -- CMD...`` (or ``openheim sandbox exec OPTIONS --
CMD...`` in the frozen binary), so it imports only the standard library and a few stdlib-only openheim modules,
and runs single-threaded, as Landlock, seccomp and unshare require. In order it: enters a private mount
namespace where every ``.git``/``.openheim`` under a writable root is read-only, openheim's data dir is hidden
and ``/dev/pts`` is a fresh instance (mounts.py); drops every capability and applies the limits
(privileges.py); applies Landlock (landlock.py) and the seccomp filter (seccomp.py); becomes a child
subreaper; then starts the command in a session of its own (no controlling terminal). When the command
ends, or this helper gets SIGTERM/SIGHUP/SIGINT, every descendant (``setsid``, double forks, ``nohup``) is killed.

``--probe`` applies everything and prints what was enforced as one JSON object instead of running a command.
Exit codes: the command's own (a signal is re-raised); 125 when ``--required`` and something is not enforced.
"""

from __future__ import annotations

import os
import sys
import time

from openheim.core.child_env import child_environ
from openheim.core.signals import SignalRoute, restore_defaults
from openheim.sandbox import mounts, privileges
from openheim.sandbox.kernel import PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, Unenforced, prctl
from openheim.sandbox.landlock import UNIX_ABI, apply_landlock, landlock_abi
from openheim.sandbox.seccomp import DENIED, apply_seccomp

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs every command
if TYPE_CHECKING:
    import signal
else:
    import _signal as signal  # not signal: its enum import costs milliseconds per command

REFUSED = 125  # --required and the kernel cannot enforce the mode: nothing was run
__all__ = ["DENIED", "REFUSED", "landlock_abi", "main", "restrict"]
_VALUED = ("--mode", "--write", "--protect", "--parent", "--tmp", "--keep-env", "--unix", "--limit", "--hide")
_LISTS = {"--write": "writable", "--protect": "protect", "--keep-env": "keep_env", "--unix": "unix", "--hide": "hide"}
USAGE = (
    "usage: openheim sandbox exec [--mode read-only|workspace-write] [--network] [--write DIR]... "
    "[--protect DIR]... [--hide PATH]... [--keep-env NAME]... [--unix PATH]... [--unix-all] [--limit NAME=N]... "
    "[--tmp DIR] [--required] -- COMMAND..."
)


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
        self.unix_all = False
        self.writable: list[str] = []
        self.protect: list[str] = []
        self.hide: list[str] = []
        self.keep_env: list[str] = []
        self.unix: list[str] = []
        self.limits: dict[str, int] = {}
        self.parent = 0
        self.cgroup = False  # set by the fork server: already in a pids cgroup
        self.tmp = ""
        self.command: list[str] = []


def _set(opts: Options, arg: str, value: str) -> None:
    if arg in _LISTS:
        getattr(opts, _LISTS[arg]).append(value)
    elif arg == "--mode":
        opts.mode = value
    elif arg == "--tmp":
        opts.tmp = value
    elif arg == "--limit":
        name, _, amount = value.partition("=")
        opts.limits[name] = int(amount)
    else:
        opts.parent = int(value)


def parse(argv: list[str]) -> Options:
    opts = Options()
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--":
            opts.command = args
            break
        if arg in _VALUED and args:
            try:
                _set(opts, arg, args.pop(0))
            except ValueError:
                raise SystemExit(f"openheim sandbox exec: {arg} needs a number; {USAGE}") from None
        elif arg in ("--network", "--required", "--probe", "--unix-all"):
            setattr(opts, arg[2:].replace("-", "_"), True)
        else:
            raise SystemExit(f"openheim sandbox exec: unknown option {arg!r}; {USAGE}")
    if opts.mode not in ("read-only", "workspace-write"):
        raise SystemExit(f"openheim sandbox exec: unknown mode {opts.mode!r}; use read-only or workspace-write")
    if not opts.command and not opts.probe:
        raise SystemExit("openheim sandbox exec: no command given after --")
    return opts


# --- restricting ----------------------------------------------------------------------------------


def _writable(opts: Options, tmp: str) -> list[str]:
    return ([tmp] if tmp else []) + (opts.writable if opts.mode == "workspace-write" else [])


def _private_mounts(opts: Options, writable: list[str], report: dict) -> list[str] | None:
    """Mounts first (they need the privileges dropped next); None, or the protected paths Landlock must leave
    out of the writable set when there is no mount namespace."""
    protect = [p for p in dict.fromkeys([*opts.protect, *mounts.find_protected(opts.writable)]) if os.path.lexists(p)]
    protect = protect if opts.mode == "workspace-write" else []
    roots = [*writable, os.getcwd()]
    hide = [h for h in opts.hide if not any(r == h or r.startswith(h.rstrip("/") + "/") for r in roots)]
    try:
        mounts.enter_namespace()
    except Unenforced as e:
        report["not_enforced"].append(f"{e}: .git/.openheim kept read-only by Landlock instead; data dir readable")
        return protect
    try:
        mounts.read_only(protect)
        report["protected"] = True
        mounts.hide(hide)
        report["data_hidden"] = True
    except Unenforced as e:
        report["not_enforced"].append(str(e))
    report["private_ptys"] = mounts.private_ptys()
    return None


def _unix_rule(opts: Options, report: dict) -> list[str] | None:
    """Which named Unix sockets Landlock admits (None: it does not check them); sets report["unix"]."""
    if opts.unix_all:
        report["unix"] = "open"
        return None
    if report["landlock_abi"] >= UNIX_ABI:
        report["unix"] = "paths" if opts.unix else "closed"
        return opts.unix
    report["unix"] = "open (paths not checked below Landlock ABI 9)" if opts.unix else "closed"
    return None


def restrict(opts: Options, tmp: str) -> dict:
    """Apply every layer it can; a report of what is enforced and what is not (with the reason)."""
    report: dict = {
        "mode": opts.mode,
        "network": opts.network,
        "landlock_abi": landlock_abi(),
        "filesystem": False,
        "protected": False,
        "data_hidden": False,
        "private_ptys": False,
        "capabilities": False,
        "tcp": False,
        "udp": False,
        "scoped": False,
        "seccomp": False,
        "unix": "open",
        "not_enforced": [],
    }
    writable = _writable(opts, tmp)
    exclude = _private_mounts(opts, writable, report)
    limit = privileges.process_limit(opts.limits)
    if os.geteuid() == 0 and limit and not opts.cgroup:  # run directly: a pids cgroup of its own (a fork server
        opts.cgroup = privileges.join_pids_cgroup(f"openheim-{os.getpid()}", limit)  # removes it once it ended)
    _layer(report, "capabilities", privileges.drop_capabilities)
    report["limits_not_enforced"] = privileges.set_limits(opts.limits, opts.cgroup)  # not part of --required
    sockets = _unix_rule(opts, report)
    ptys = report["private_ptys"]
    _layer(report, "filesystem", lambda: report.update(apply_landlock(writable, opts.network, ptys, sockets, exclude)))
    if exclude is not None and report["filesystem"]:
        report["protected"] = True
    unix_ok = report["unix"] != "closed" or (report["filesystem"] and report["landlock_abi"] >= UNIX_ABI)
    _layer(report, "seccomp", lambda: apply_seccomp(opts.network, unix_ok))
    if not report["seccomp"] and report["unix"] == "closed" and not report.get("unix_paths"):
        report["unix"] = "open"
        report["not_enforced"].append("named Unix sockets: open (needs seccomp, or Landlock ABI 9)")
    report["udp"] = report["seccomp"] and not opts.network
    report["tcp"] = report["tcp"] or report["udp"]
    return report


def _layer(report: dict, key: str, apply: object) -> None:
    try:
        apply()  # type: ignore[operator]
        report[key] = True
    except Unenforced as e:
        report["not_enforced"].append(str(e))


# --- running --------------------------------------------------------------------------------------


def _finish(status: int) -> int:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            restore_defaults(sig)
        sys.stdout.flush()
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


def _run(opts: Options, own_session: bool) -> int:
    """Start the command (posix_spawn: no copy of this process) and reap orphans handed to us until it ends."""
    env = child_environ(sandboxed=True, keep=opts.keep_env)
    if opts.tmp:
        env["TMPDIR"] = opts.tmp
    defaults = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE)
    try:
        pid = os.posix_spawnp(opts.command[0], opts.command, env, setsigdef=defaults, setsid=not own_session)
    except OSError as e:
        os.write(2, f"openheim sandbox: cannot run {opts.command[0]}: {e.strerror}\n".encode())
        return 127 << 8
    while True:
        done, status = os.waitpid(-1, 0)
        if done == pid:
            return status


def run_restricted(opts: Options, report: dict | None = None) -> int:
    """Restrict this process, run the command as a child, kill what it leaves; its wait status (or an exit code
    shifted into one: REFUSED, 128+signal when we were stopped). ``report``: what was enforced, filled in."""
    own_session = privileges.leave_terminal()
    done = restrict(opts, opts.tmp)
    if report is not None:
        report.update(done)
    if opts.required and done["not_enforced"]:
        sys.stderr.write(f"openheim sandbox: required but not enforced: {'; '.join(done['not_enforced'])}\n")
        return REFUSED << 8
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    SignalRoute(_on_signal, (signal.SIGTERM, signal.SIGHUP, signal.SIGINT))  # for the helper's whole life
    try:
        return _run(opts, own_session)
    except _Stop as stop:
        return (128 + stop.signum) << 8
    finally:
        kill_descendants()


def main(argv: list[str]) -> int:
    opts = parse(argv)
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if opts.parent and os.getppid() != opts.parent:
        return REFUSED  # openheim ended before we started
    if opts.probe:
        import json

        sys.stdout.write(json.dumps(restrict(opts, opts.tmp)) + "\n")
        return 0
    return _finish(run_restricted(opts))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
