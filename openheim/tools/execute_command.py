"""execute_command: run a shell command in its own process group, capped, timed out and cancellable."""
from __future__ import annotations

import os
import selectors
import subprocess
import time
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from openheim.core.client_io import terminal
from openheim.core.tool_args import require_str
from openheim.core.tools import BaseTool, ToolCapabilities, ToolView, ViewContext, short
from openheim.errors import ToolExecutionError
from openheim.tools.process import (
    child_env,
    kill_group,
    register_group,
    signal_name,
    unregister_group,
)

if TYPE_CHECKING:
    from openheim.core.turn_context import CancelToken, TurnContext

TIMEOUT = 120.0
CAP = 65536
DRAIN_SECONDS = 1.0
REAP_SECONDS = 5.0
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


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
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


def _pipes(proc: subprocess.Popen) -> tuple[IO[bytes], IO[bytes]]:
    """The shell's stdout and stderr (it is always started with both piped)."""
    assert proc.stdout is not None and proc.stderr is not None
    return proc.stdout, proc.stderr


def _pipes_open(sel: selectors.BaseSelector) -> bool:
    return any(key.data != "exit" for key in sel.get_map().values())


def _pump(proc: subprocess.Popen, out: Outcome, sel: selectors.BaseSelector, deadline: float, cancel: CancelToken,
          pidfd: int | None) -> None:
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


def _drain(sel: selectors.BaseSelector, proc: subprocess.Popen, out: Outcome) -> None:
    """After the group is killed, take what is still buffered in the pipes (bounded in time)."""
    stdout, stderr = _pipes(proc)
    streams = {stdout.fileno(): out.stdout, stderr.fileno(): out.stderr}
    until = time.monotonic() + DRAIN_SECONDS
    while _pipes_open(sel) and time.monotonic() < until:
        _read_ready(sel, until - time.monotonic(), streams)


def _selector(proc: subprocess.Popen, pidfd: int | None) -> selectors.BaseSelector:
    sel = selectors.DefaultSelector()
    for pipe in _pipes(proc):
        os.set_blocking(pipe.fileno(), False)
        sel.register(pipe.fileno(), selectors.EVENT_READ, "pipe")
    if pidfd is not None:
        sel.register(pidfd, selectors.EVENT_READ, "exit")
    return sel


def run_group(proc: subprocess.Popen, timeout: float, cap: int, cancel: CancelToken) -> Outcome:
    """Supervise a started process group to the end; the group is always killed and reaped."""
    out = Outcome(Capped(cap), Capped(cap))
    pgid = proc.pid
    register_group(pgid)
    remove = cancel.on_cancel(lambda: kill_group(pgid))
    pidfd = _pidfd(proc.pid)
    sel = _selector(proc, pidfd)
    deadline = time.monotonic() + timeout
    try:
        _pump(proc, out, sel, deadline, cancel, pidfd)
        kill_group(pgid)
        _drain(sel, proc, out)
    finally:
        remove()
        kill_group(pgid)
        _finish(proc, sel, pidfd, out)
        unregister_group(pgid)
    out.cancelled = out.cancelled or (cancel.cancelled and out.returncode != 0)
    return out


def _finish(proc: subprocess.Popen, sel: selectors.BaseSelector, pidfd: int | None, out: Outcome) -> None:
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
        raise ToolExecutionError(f"Command timed out after {timeout:g} seconds and was killed.\n"
                                 f"Stdout: {stdout}\nStderr: {stderr}")
    if out.returncode is not None and out.returncode < 0:
        raise ToolExecutionError(f"Command killed by signal {signal_name(-out.returncode)}:\n"
                                 f"Stdout: {stdout}\nStderr: {stderr}")
    if out.returncode != 0:
        raise ToolExecutionError(f"Command failed:\nStdout: {stdout}\nStderr: {stderr}")
    if not stderr:
        return stdout
    if stdout and not stdout.endswith("\n"):
        stdout += "\n"
    return f"{stdout}[stderr]\n{stderr}"


class ExecuteCommandTool(BaseTool):
    """Run a shell command (only registered when allow_shell is on)."""

    name = "execute_command"
    description = ("Run a shell command with `sh -c` in the working directory (stdin is closed). Returns "
                   "stdout, then stderr under a '[stderr]' line when there is any. Times out after 120 s; "
                   "each stream is capped at 64 KiB.")
    parameters = {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The shell command to run"}},
        "required": ["command"],
    }
    capabilities = ToolCapabilities(read_only=False, kind="execute", approval_scope="exact_arguments")

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        command = (args or {}).get("command")
        if not command:
            return ToolView(self.name, self.capabilities.kind)
        return ToolView(f"Run `{short(command)}`", self.capabilities.kind, command=str(command))

    def __init__(self, timeout: float = TIMEOUT, cap: int = CAP) -> None:
        self.timeout = timeout
        self.cap = cap

    def execute(self, args: dict, ctx: TurnContext) -> str:
        command = require_str(args, "command")
        if ctx.cancel.cancelled:
            raise ToolExecutionError("Command cancelled.")
        client = terminal(ctx.client_io)
        if client is not None:  # an editor that runs commands in its own terminal
            return client.run_command(command, ctx, self.timeout, self.cap)
        try:
            proc = subprocess.Popen(["sh", "-c", command], cwd=ctx.effective_cwd, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                    env=child_env(ctx.secret_env_vars))
        except OSError as e:
            raise ToolExecutionError(f"Failed to execute command: {e}") from None
        return format_outcome(run_group(proc, self.timeout, self.cap, ctx.cancel), self.timeout)
