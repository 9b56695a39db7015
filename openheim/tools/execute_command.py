"""execute_command: run a shell command in its own process group, capped, timed out and cancellable."""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from openheim.core.child_env import child_environ
from openheim.core.client_io import terminal
from openheim.core.tool_args import require_str
from openheim.core.tools import BaseTool, ToolView, ViewContext, short
from openheim.errors import ToolExecutionError
from openheim.sandbox.policy import REFUSED_EXIT, Sandbox, explain_refusal
from openheim.sandbox.server import spawn
from openheim.sandbox.support import announce_gaps
from openheim.tools.process import (
    kill_group,
    register_group,
    signal_name,
    unregister_group,
)
from openheim.tools.specs import EXECUTE_COMMAND

if TYPE_CHECKING:
    from typing import TypeAlias

    from openheim.sandbox.server import Served

    Process: TypeAlias = "subprocess.Popen[bytes] | Served"
    from openheim.core.turn_context import CancelToken, TurnContext

TIMEOUT = 120.0
CAP = 65536
DRAIN_SECONDS = 1.0
REAP_SECONDS = 5.0
HELPER_STOP_SECONDS = 2.0
_POLL = 0.1


@dataclass
class Capped:
    """The first ``cap`` bytes of a stream and how many bytes it had in all."""

    cap: int
    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    def text(self) -> str:
        text = bytes(self.data).decode("utf-8", "replace")
        if self.total > self.cap:
            text += f"\n[output truncated at {self.cap} bytes]\n"
        return text


@dataclass
class Outcome:
    stdout: Capped
    stderr: Capped
    returncode: int | None = None
    timed_out: bool = False
    cancelled: bool = False


def _pidfd(proc: Process) -> int | None:
    """An fd that becomes readable when the process ends (a sandboxed command's answer socket, else a pidfd)."""
    exit_fd = getattr(proc, "exit_fd", None)
    if exit_fd is not None:
        return os.dup(exit_fd)
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return None


def _exited(pid: int) -> bool:
    """True once the child has exited, without reaping it (its pid stays the group id)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _read_ready(sel: selectors.BaseSelector, timeout: float, streams: dict) -> bool:
    """Read whatever is ready; True when the process-exit fd fired."""
    exited = False
    for key, _ in sel.select(timeout):
        if key.data == "exit":
            exited = True
            sel.unregister(key.fd)
            continue
        try:
            chunk = os.read(key.fd, 65536)
        except BlockingIOError:
            continue
        if chunk:
            streams[key.fd].add(chunk)
        else:
            sel.unregister(key.fd)
    return exited


def _pipes(proc: Process) -> tuple[IO[bytes], IO[bytes]]:
    """The shell's stdout and stderr (it is always started with both piped)."""
    assert proc.stdout is not None and proc.stderr is not None
    return proc.stdout, proc.stderr


def _pipes_open(sel: selectors.BaseSelector) -> bool:
    return any(key.data != "exit" for key in sel.get_map().values())


def _pump(
    proc: Process, out: Outcome, sel: selectors.BaseSelector, deadline: float, cancel: CancelToken, pidfd: int | None
) -> None:
    """Read both pipes until the shell exits, time runs out or the turn is cancelled."""
    stdout, stderr = _pipes(proc)
    streams = {stdout.fileno(): out.stdout, stderr.fileno(): out.stderr}
    while True:
        if cancel.cancelled:
            out.cancelled = True
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            out.timed_out = True
            return
        wait = remaining if pidfd is not None else min(remaining, _POLL)
        if _read_ready(sel, wait, streams) or (pidfd is None and _exited(proc.pid)):
            return


def _drain(sel: selectors.BaseSelector, proc: Process, out: Outcome) -> None:
    """After the group is killed, take what is still buffered in the pipes (bounded in time)."""
    stdout, stderr = _pipes(proc)
    streams = {stdout.fileno(): out.stdout, stderr.fileno(): out.stderr}
    until = time.monotonic() + DRAIN_SECONDS
    while _pipes_open(sel) and time.monotonic() < until:
        _read_ready(sel, until - time.monotonic(), streams)


def _selector(proc: Process, pidfd: int | None) -> selectors.BaseSelector:
    sel = selectors.DefaultSelector()
    for pipe in _pipes(proc):
        os.set_blocking(pipe.fileno(), False)
        sel.register(pipe.fileno(), selectors.EVENT_READ, "pipe")
    if pidfd is not None:
        sel.register(pidfd, selectors.EVENT_READ, "exit")
    return sel


def _stop_helper(proc: Process) -> None:
    """Ask the sandbox helper to kill every descendant (it is their subreaper) and wait a little for it."""
    if proc.poll() is not None:
        return
    try:
        proc.terminate()
        proc.wait(timeout=HELPER_STOP_SECONDS)
    except (OSError, subprocess.TimeoutExpired):
        pass


def run_group(proc: Process, timeout: float, cap: int, cancel: CancelToken, helper: bool = False) -> Outcome:
    """Supervise a started process group to the end; the group is always killed and reaped.

    ``helper``: the process is the sandbox helper, which kills the command's other descendants (also those
    in new sessions) when it gets SIGTERM; it is stopped that way before the group is killed."""
    out = Outcome(Capped(cap), Capped(cap))
    pgid = proc.pid
    register_group(pgid, helper)
    stop = (lambda: proc.terminate()) if helper else (lambda: kill_group(pgid))
    remove = cancel.on_cancel(stop)
    pidfd = _pidfd(proc)
    sel = _selector(proc, pidfd)
    deadline = time.monotonic() + timeout
    try:
        _pump(proc, out, sel, deadline, cancel, pidfd)
        if helper:
            _stop_helper(proc)
        kill_group(pgid)
        _drain(sel, proc, out)
    finally:
        remove()
        if helper:
            _stop_helper(proc)
        kill_group(pgid)
        _finish(proc, sel, pidfd, out)
        unregister_group(pgid)
    out.cancelled = out.cancelled or (cancel.cancelled and out.returncode != 0)
    return out


def _finish(proc: Process, sel: selectors.BaseSelector, pidfd: int | None, out: Outcome) -> None:
    sel.close()
    if pidfd is not None:
        os.close(pidfd)
    for pipe in _pipes(proc):
        pipe.close()
    try:
        out.returncode = proc.wait(timeout=REAP_SECONDS)
    except subprocess.TimeoutExpired:
        out.returncode = None


def format_outcome(out: Outcome, timeout: float) -> str:
    """The tool result for a finished command, or the ToolExecutionError for a failed one."""
    stdout, stderr = out.stdout.text(), out.stderr.text()
    if out.cancelled:
        raise ToolExecutionError("Command cancelled.")
    if out.timed_out:
        raise ToolExecutionError(
            f"Command timed out after {timeout:g} seconds and was killed.\nStdout: {stdout}\nStderr: {stderr}"
        )
    if out.returncode is not None and out.returncode < 0:
        raise ToolExecutionError(
            f"Command killed by signal {signal_name(-out.returncode)}:\nStdout: {stdout}\nStderr: {stderr}"
        )
    if out.returncode != 0:
        raise ToolExecutionError(f"Command failed:\nStdout: {stdout}\nStderr: {stderr}")
    if not stderr:
        return stdout
    if stdout and not stdout.endswith("\n"):
        stdout += "\n"
    return f"{stdout}[stderr]\n{stderr}"


class ExecuteCommandTool(BaseTool):
    """Run a shell command (only registered when allow_shell is on)."""

    name, description, parameters, capabilities = EXECUTE_COMMAND.fields()

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        command = (args or {}).get("command")
        if not command:
            return ToolView(self.name, self.capabilities.kind)
        return ToolView(f"Run `{short(command)}`", self.capabilities.kind, command=str(command))

    def __init__(self, timeout: float = TIMEOUT, cap: int = CAP, sandbox: Sandbox | None = None) -> None:
        self.timeout = timeout
        self.cap = cap
        self.sandbox = sandbox or Sandbox(mode="off")

    def execute(self, args: dict, ctx: TurnContext) -> str:
        command = require_str(args, "command")
        if ctx.cancel.cancelled:
            raise ToolExecutionError("Command cancelled.")
        client = terminal(ctx.client_io)
        if client is not None:  # an editor that runs commands in its own terminal (on this machine)
            argv = self.sandbox.wrap(["sh", "-c", command], ctx.work_dir) if self.sandbox.active else None
            try:
                return client.run_command(command, ctx, self.timeout, self.cap, argv=argv)
            except ToolExecutionError as e:
                raise _explained(e, self.sandbox, ctx.work_dir, e.message) from None
        with _private_tmp(self.sandbox) as tmp:
            proc = self._start(command, ctx, tmp)
            out = run_group(proc, self.timeout, self.cap, ctx.cancel, helper=self.sandbox.active)
        if self.sandbox.active:
            announce_gaps(self.sandbox, getattr(proc, "not_enforced", []), ctx.work_dir)
        return sandboxed_outcome(out, self.timeout, self.sandbox, ctx.work_dir)

    def _start(self, command: str, ctx: TurnContext, tmp: str | None) -> Process:
        """``sh -c command`` in the session cwd, as its own process group; through the sandbox's fork server
        when the sandbox is on."""
        env = child_environ(secrets=ctx.secret_env_vars, sandboxed=self.sandbox.active, keep=self.sandbox.keep_env)
        try:
            if self.sandbox.active:
                options = self.sandbox.helper_options(ctx.work_dir, tmp)
                return spawn([*options, "--", "sh", "-c", command], ctx.effective_cwd, env)
            return subprocess.Popen(
                ["sh", "-c", command],
                cwd=ctx.effective_cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=env,
            )
        except OSError as e:
            raise ToolExecutionError(f"Failed to execute command: {e}") from None


@contextlib.contextmanager
def _private_tmp(sandbox: Sandbox) -> Iterator[str | None]:
    """A command's own temp dir (TMPDIR), removed afterwards; None when the sandbox is off."""
    if not sandbox.active:
        yield None
        return
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="openheim-cmd-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sandboxed_outcome(out: Outcome, timeout: float, sandbox: Sandbox, root: str | os.PathLike) -> str:
    """format_outcome, plus one line saying what the sandbox refused when the command failed because of it."""
    if sandbox.required and out.returncode == REFUSED_EXIT and "required but not enforced" in out.stderr.text():
        reason = out.stderr.text().strip().splitlines()[-1].removeprefix("openheim sandbox: ")
        raise ToolExecutionError(
            f"Command refused: the sandbox ({sandbox.mode}) is {reason}; nothing was run. "
            'Set [sandbox] required = false (or mode = "off") to run commands unconfined.'
        )
    try:
        return format_outcome(out, timeout)
    except ToolExecutionError as e:
        raise _explained(e, sandbox, root, out.stderr.text() + "\n" + out.stdout.text()) from None


def _explained(error: ToolExecutionError, sandbox: Sandbox, root: str | os.PathLike, output: str) -> ToolExecutionError:
    """``error`` with one more line when the output shows the sandbox refused something."""
    note = explain_refusal(sandbox, root, output)
    return error if note is None else ToolExecutionError(f"{error.message}\n{note}")
