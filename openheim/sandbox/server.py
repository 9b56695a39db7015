"""Sandboxed commands through one long-lived helper (a fork server), so each costs a fork, not a Python start.

The server is the sandbox helper started once with ``--serve`` (single-threaded, unrestricted); every command
gets a forked child of it that restricts itself, runs the command as its own child and kills what it leaves
(see helper.py). ``spawn`` returns a ``Served``, which quacks like the ``subprocess.Popen`` that
execute_command supervises: ``pid`` (also its process group), ``stdout``/``stderr`` pipes, ``poll``, ``wait``,
``terminate``, plus ``exit_fd``, which becomes readable when the command has ended.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from typing import IO

from openheim.core.child_env import child_environ
from openheim.sandbox.policy import helper_command

_MESSAGE = 1 << 16
_KILLED = 9  # the wait status of a helper that gave no (usable) answer: reported as killed


def _answer(data: bytes, key: str, top: int) -> tuple[int, list[str]] | None:
    """``data[key]`` when ``data`` is a JSON object holding an integer 0..top there (and the not-enforced list)."""
    try:
        answer = json.loads(data)
    except ValueError:
        return None
    value = answer.get(key) if isinstance(answer, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= top:
        return None
    gaps = answer.get("not_enforced", [])
    return value, [g for g in gaps if isinstance(g, str)] if isinstance(gaps, list) else []


class Served:
    """One sandboxed command run by the fork server."""

    def __init__(self, pid: int, conn: socket.socket, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        self.pid, self._conn, self.stdout, self.stderr = pid, conn, stdout, stderr
        self.returncode: int | None = None
        self.not_enforced: list[str] = []  # what the helper could not apply (reported by the caller once)

    @property
    def exit_fd(self) -> int:
        return self._conn.fileno()

    def _take(self, timeout: float | None) -> int | None:
        if self.returncode is None and self._conn.fileno() >= 0:
            self._conn.settimeout(timeout)
            try:
                data = self._conn.recv(_MESSAGE)
            except (TimeoutError, BlockingIOError):
                return None
            except OSError:
                data = b""
            status, self.not_enforced = _answer(data, "status", 0xFFFF) or (_KILLED, [])
            self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(status)
            self._conn.close()  # lets the helper exit
        return self.returncode

    def poll(self) -> int | None:
        return self._take(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._take(timeout)
        if code is None:
            raise subprocess.TimeoutExpired("sandboxed command", timeout or 0)
        return code

    def terminate(self) -> None:
        """SIGTERM to the helper: it kills the command and everything it started, then answers."""
        if self.returncode is None:
            try:
                os.kill(self.pid, 15)
            except OSError:
                pass


class ForkServer:
    """The process's sandbox fork server, started on first use and again if it ever ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._proc: subprocess.Popen | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self._proc = subprocess.Popen(
                [*helper_command(), "--serve", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env=child_environ(sandboxed=True),
            )
        self._control = ours
        return ours

    def _connect(self) -> socket.socket:
        """A socket to a fresh child of the server (the server is (re)started when needed)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs, self._lock:
            for attempt in range(2):
                control = self._control if self._control is not None and attempt == 0 else self._start()
                try:
                    socket.send_fds(control, [b"r"], [theirs.fileno()])
                    return ours
                except OSError:
                    self._control = None
        raise OSError("the sandbox helper did not start")

    def spawn(self, argv: list[str], cwd: str | os.PathLike, env: dict[str, str]) -> Served:
        """Run ``argv`` (helper options, ``--``, the command) in ``cwd`` with exactly ``env``."""
        conn = self._connect()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            request = json.dumps({"argv": argv, "cwd": os.fspath(cwd), "env": env}).encode()
            socket.send_fds(conn, [request], [null, out_w, err_w])
        except OSError:
            for fd in (out_r, err_r):
                os.close(fd)
            conn.close()
            raise
        finally:
            for fd in (null, out_w, err_w):
                os.close(fd)
        conn.settimeout(10)
        try:
            answer = conn.recv(_MESSAGE)
        except OSError:
            answer = b""
        pid = _answer(answer, "pid", 1 << 30) if answer else None
        if not pid or not pid[0]:
            conn.close()
            os.close(out_r)
            os.close(err_r)
            raise OSError("the sandbox helper did not answer" if not answer else "the sandbox helper answered garbage")
        return Served(pid[0], conn, os.fdopen(out_r, "rb", 0), os.fdopen(err_r, "rb", 0))


_server = ForkServer()


def spawn(argv: list[str], cwd: str | os.PathLike, env: dict[str, str]) -> Served:
    return _server.spawn(argv, cwd, env)
