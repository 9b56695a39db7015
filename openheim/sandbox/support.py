"""What this machine's kernel enforces of a sandbox: a quick in-process look, and the helper's own report."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading

from openheim.core.child_env import child_environ
from openheim.sandbox.landlock import UNIX_ABI, landlock_abi
from openheim.sandbox.policy import Sandbox, helper_command
from openheim.sandbox.seccomp import DENIED

log = logging.getLogger("openheim.sandbox")
PROBE_TIMEOUT = 10.0
_announced: set[Sandbox] = set()
_announced_gaps: set[tuple[Sandbox, str]] = set()
_lock = threading.Lock()


def _seccomp_in_kernel() -> bool:
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            return any(line.startswith("Seccomp:") for line in f)
    except OSError:
        return False


def helper_abi() -> int:
    return landlock_abi() if sys.platform.startswith("linux") else 0


def quick_gaps(sandbox: Sandbox) -> list[str]:
    """What the kernel will not enforce of ``sandbox``, judged without starting anything (cheap)."""
    if not sandbox.active:
        return []
    if not sys.platform.startswith("linux"):
        return [f"commands are not confined on {sys.platform} (the sandbox needs Linux)"]

    gaps = []
    abi = helper_abi()
    if abi < 1:
        gaps.append("file system: this kernel has no Landlock")
    if os.uname().machine not in DENIED or not _seccomp_in_kernel():
        gaps.append("network and escapes: no seccomp filter for this kernel or architecture")
    elif abi < 6:
        gaps.append(f"signals to openheim: Landlock ABI {abi} has no scopes (6 needed)")
    return gaps


def announce(sandbox: Sandbox) -> None:
    """One warning line per process when a session gets the shell and the sandbox is off or not enforced."""
    with _lock:
        if sandbox in _announced:
            return
        _announced.add(sandbox)
    if not sandbox.active:
        log.warning(
            "sandbox is off: shell commands run with all your permissions and network "
            "(set [sandbox] mode, see docs/security.md)"
        )
        return
    gaps = quick_gaps(sandbox)
    if gaps:
        verb = "refused" if sandbox.required else "run less confined than asked"
        log.warning("sandbox (%s) not fully enforced, commands are %s: %s", sandbox.mode, verb, "; ".join(gaps))
    if isinstance(sandbox.unix_sockets, tuple) and sandbox.unix_sockets and helper_abi() < UNIX_ABI:
        log.warning(
            "sandbox: allow_unix_sockets opens every named Unix socket to commands, not only the ones listed "
            "(Landlock checks socket paths from ABI %d; this kernel has %d)",
            UNIX_ABI,
            helper_abi(),
        )


def announce_gaps(sandbox: Sandbox, gaps: list[str], root: str | os.PathLike) -> None:
    """One line per process, at the first command, for each layer the helper reported it could not apply (and
    each ``writable_roots`` entry left out because a symlink inside a writable tree leads to it)."""
    lines = [
        *gaps,
        *(
            f"writable_roots entry {e} left out: it passes through the symlink {link}, which a command "
            "or the repository could point anywhere"
            for e, link in sandbox.linked_roots(root)
        ),
    ]
    with _lock:
        fresh = [line for line in lines if (sandbox, line) not in _announced_gaps]
        _announced_gaps.update((sandbox, line) for line in fresh)
    if fresh:
        verb = "refused" if sandbox.required else "run less confined than asked"
        log.warning("sandbox (%s) not fully enforced, commands are %s: %s", sandbox.mode, verb, "; ".join(fresh))


def probe(sandbox: Sandbox, root: str) -> dict:
    """Start the helper with ``--probe``: what it actually enforced (landlock_abi, filesystem, protected, tcp,
    udp, scoped, seccomp, not_enforced). On failure: ``{"error": ...}``."""
    if not sandbox.active:
        return {"mode": "off"}
    argv = [*helper_command(), *sandbox.helper_options(root), "--probe"]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            cwd=root,
            stdin=subprocess.DEVNULL,
            env=child_environ(sandboxed=True),
        )
        report = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        return {"mode": sandbox.mode, "error": f"the sandbox helper did not start: {e}"}
    return report if isinstance(report, dict) else {"mode": sandbox.mode, "error": "the helper gave no report"}


def summary(report: dict) -> str:
    """The report as one line, e.g. ``workspace-write, network off: Landlock ABI 7 (files, TCP, scopes),
    seccomp (UDP, escapes), .git read-only``."""
    if report.get("mode") == "off":
        return "off: commands run with all your permissions"
    if "error" in report:
        return f"{report.get('mode')}: {report['error']}"
    net = "network on" if report.get("network") else "network off"
    parts = []
    if report.get("filesystem"):
        scopes = ", scopes" if report.get("scoped") else ""
        parts.append(f"Landlock ABI {report.get('landlock_abi')} (files{scopes})")
    if report.get("seccomp"):
        parts.append("seccomp (" + ("sockets, " if not report.get("network") else "") + "escapes)")
    if report.get("protected"):
        parts.append("every .git/.openheim read-only")
    if report.get("data_hidden"):
        parts.append("data dir hidden")
    if report.get("capabilities"):
        parts.append("no capabilities")
    if report.get("private_ptys"):
        parts.append("own ptys only")
    parts.append(f"named Unix sockets {report.get('unix', 'open')}")
    line = f"{report.get('mode')}, {net}: " + (", ".join(parts) or "nothing enforced")
    if report.get("not_enforced"):
        line += "; NOT enforced: " + "; ".join(report["not_enforced"])
    if report.get("limits_not_enforced"):
        line += "; " + "; ".join(report["limits_not_enforced"])
    return line
