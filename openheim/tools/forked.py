"""Run a step that may never return to the interpreter (a regex match) in a forked child that can be killed.

Python's ``re`` backtracks without bound on some patterns and holds the interpreter while it does,
so neither a deadline, a cancel nor a signal handler could run. In a child process it is just a
process: the parent waits on a pipe, kills the child's process group at the deadline, on cancel or
from the signal handlers' ``kill_all``, and the child also dies by itself (SIGALRM backstop, parent
death signal) if the parent cannot.
"""

from __future__ import annotations

import gc
import os
import pickle
import selectors
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from openheim.core.signals import restore_defaults
from openheim.errors import OpenheimError
from openheim.tools.process import (
    kill_group,
    libc,
    register_group,
    set_parent_death_signal,
    signal_name,
    unregister_group,
)

if TYPE_CHECKING:
    from openheim.core.turn_context import CancelToken

_BACKSTOP = 2.0  # the child's own alarm fires this long after the parent's deadline
_fork_lock = threading.Lock()


class Expired(Exception):
    """The deadline passed; the child was killed."""


class Interrupted(Exception):
    """The cancel token fired; the child was killed."""


def can_fork() -> bool:
    return hasattr(os, "fork") and sys.platform != "win32"


def run_forked(work: Callable[[], object], timeout: float, cancel: CancelToken) -> object:
    """``work()`` in a forked child, its result (picklable) or its OpenheimError handed back.

    Raises Expired after ``timeout`` seconds and Interrupted on cancel, both with the child's
    whole process group killed.
    """
    libc()  # loaded here: the child must not dlopen (another thread may have held the loader's lock)
    parent = os.getpid()
    with _fork_lock:  # no other child may inherit this pipe's write end: its EOF is the answer
        read_end, write_end = os.pipe()
        try:
            with warnings.catch_warnings():  # 3.12+ warns about fork() in a threaded process
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except BaseException:
            os.close(read_end)
            os.close(write_end)
            raise
        if pid == 0:  # the child: never returns
            os.close(read_end)
            _child(work, write_end, timeout, parent)
        os.close(write_end)
    return _supervise(pid, read_end, timeout, cancel)


def _child(work: Callable[[], object], out: int, timeout: float, parent: int) -> None:
    code = 0
    try:
        gc.disable()  # no finalizer of an object inherited from the parent may close a descriptor here
        os.setpgid(0, 0)
        restore_defaults(signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGALRM)
        signal.setitimer(signal.ITIMER_REAL, timeout + _BACKSTOP)
        set_parent_death_signal()
        if os.getppid() != parent:
            os._exit(1)
        try:
            payload = ("ok", work())
        except OpenheimError as e:
            payload = ("error", e)
        except BaseException as e:  # handed back as a crash, like an exception in the tool thread
            payload = ("crash", f"{type(e).__name__}: {e}")
        data = pickle.dumps(payload)
        view = memoryview(data)
        while view:
            view = view[os.write(out, view) :]
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _supervise(pid: int, fd: int, timeout: float, cancel: CancelToken) -> object:
    lock = threading.Lock()
    reaped = False

    def kill() -> None:
        with lock:
            if not reaped:
                kill_group(pid)

    try:
        os.setpgid(pid, pid)  # also done by the child; whichever runs first wins the race
    except OSError:
        pass
    register_group(pid)
    remove = cancel.on_cancel(kill)
    chunks: list[bytes] = []
    status = ended = None
    try:
        ended = _read_all(fd, chunks, time.monotonic() + timeout)
    finally:
        if not ended:
            kill()
        remove()
        os.close(fd)
        with lock:
            unregister_group(pid)
            _, status = os.waitpid(pid, 0)
            reaped = True
    if cancel.cancelled:
        raise Interrupted
    if not ended:
        raise Expired
    return _unpack(b"".join(chunks), status)


def _read_all(fd: int, chunks: list[bytes], deadline: float) -> bool:
    """Read until EOF (True) or the deadline (False)."""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if not sel.select(remaining):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return True
            chunks.append(chunk)


def _unpack(data: bytes, status: int) -> object:
    if not data:
        if os.WIFSIGNALED(status):
            raise RuntimeError(f"the worker process was killed by {signal_name(os.WTERMSIG(status))}")
        raise RuntimeError(f"the worker process exited with status {os.waitstatus_to_exitcode(status)}")
    kind, value = pickle.loads(data)
    if kind == "ok":
        return value
    if kind == "error":
        raise value
    raise RuntimeError(value)
