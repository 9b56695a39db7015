"""One hook command as a process: started in its own session, its input written and its output read
incrementally (at most ``cap`` bytes of each stream are kept, the rest is drained and dropped), all against
one deadline. Nothing a hook leaves behind can hold the turn: once the hook has exited, what still holds its
output pipes gets ``LINGER`` seconds and is then killed; at the deadline or on cancel the whole tree is
killed (the process group, and every process carrying this run's ``OPENHEIM_HOOK_RUN`` mark in its
environment, which finds children that moved to a session of their own with ``setsid``).
"""

from __future__ import annotations

import os
import secrets
import selectors
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from openheim.core.child_env import child_environ

RUN_MARK = "OPENHEIM_HOOK_RUN"
LINGER = 0.5  # seconds a hook's leftovers may keep its pipes open after it exited
_CHUNK = 64 * 1024


@dataclass
class _Streams:
    """The pipes of one run and what was read from them."""

    cap: int
    data: dict[int, bytearray] = field(default_factory=dict)
    pending: bytes = b""

    def read(self, fd: int) -> bool:
        """Read what is there; False at end of file."""
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return True
        except OSError:
            return False
        kept = self.data.setdefault(fd, bytearray())
        if len(kept) < self.cap:
            kept += chunk[: self.cap - len(kept)]
        return bool(chunk)

    def write(self, fd: int) -> bool:
        """Write what is pending; False once all is written or the reader is gone."""
        try:
            done = os.write(fd, self.pending[:_CHUNK])
        except BlockingIOError:
            return True
        except OSError:
            return False
        self.pending = self.pending[done:]
        return bool(self.pending)


def marked_processes(mark: str) -> list[int]:
    """The pids whose environment carries ``RUN_MARK=mark`` (those of this user; none without /proc)."""
    needle = f"{RUN_MARK}={mark}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*") if Path("/proc/self").exists() else ():
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def kill_tree(pid: int, mark: str) -> None:
    """SIGKILL the process group ``pid`` leads and every process carrying ``mark``."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    for other in marked_processes(mark):
        try:
            os.kill(other, signal.SIGKILL)
        except OSError:
            pass


def _pipes(proc: subprocess.Popen) -> tuple[IO[bytes], IO[bytes], IO[bytes]]:
    """The child's stdin, stdout and stderr (all three are pipes here)."""
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
    assert stdin is not None and stdout is not None and stderr is not None
    return stdin, stdout, stderr


def _register(proc: subprocess.Popen, streams: _Streams) -> tuple[selectors.BaseSelector, int]:
    """A selector over the hook's pipes (stdin only while there is input to write); the stdin fd."""
    stdin, stdout, stderr = _pipes(proc)
    sel = selectors.DefaultSelector()
    for pipe in (stdout, stderr):
        os.set_blocking(pipe.fileno(), False)
        sel.register(pipe.fileno(), selectors.EVENT_READ)
    if streams.pending:
        os.set_blocking(stdin.fileno(), False)
        sel.register(stdin.fileno(), selectors.EVENT_WRITE)
    else:
        stdin.close()
    return sel, stdin.fileno() if not stdin.closed else -1


def _pump(proc: subprocess.Popen, streams: _Streams, deadline: float, stopped: Callable[[], bool]) -> str | None:
    """Move data until the hook has exited and its pipes are closed: None, or why it stopped earlier
    (``"timeout"``, ``"cancelled"``, ``"linger"``: the hook exited but something still holds its pipes)."""
    sel, stdin = _register(proc, streams)
    exited_at: float | None = None
    try:
        while sel.get_map() or proc.poll() is None:
            now = time.monotonic()
            if stopped():
                return "cancelled"
            if now >= deadline:
                return "timeout"
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now >= exited_at + LINGER:
                return "linger"
            for key, _ in sel.select(min(0.05, deadline - now)):
                more = streams.write(key.fd) if key.fd == stdin else streams.read(key.fd)
                if not more:
                    sel.unregister(key.fd)
                    if key.fd == stdin:
                        _pipes(proc)[0].close()
        return None
    finally:
        sel.close()


def run_command(
    argv: list[str],
    stdin: bytes,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    cap: int,
    stopped: Callable[[], bool] = lambda: False,
) -> tuple[int, bytes, bytes] | str:
    """Run ``argv``: (exit code, stdout, stderr), each cut to ``cap`` bytes; or ``"timeout"``,
    ``"cancelled"``, or why it could not start."""
    mark = secrets.token_hex(8)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=str(cwd),
            env=child_environ(env, extra={RUN_MARK: mark}),
            start_new_session=True,
        )
    except OSError as e:
        return f"could not start: {e.strerror or e}"
    streams = _Streams(cap, pending=stdin)
    out_fd, err_fd = _pipes(proc)[1].fileno(), _pipes(proc)[2].fileno()
    try:
        ended = _pump(proc, streams, time.monotonic() + timeout, stopped)
        if ended is not None:
            kill_tree(proc.pid, mark)
    finally:
        for pipe in _pipes(proc):
            pipe.close()
    code = proc.wait()
    if ended in ("timeout", "cancelled"):
        return ended
    return code, bytes(streams.data.get(out_fd, b"")), bytes(streams.data.get(err_fd, b""))
