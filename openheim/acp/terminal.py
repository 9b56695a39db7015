"""execute_command through the client's terminal (terminal/create → wait_for_exit → output → release)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from openheim.acp.util import RpcError
from openheim.errors import Cancelled, ToolExecutionError

if TYPE_CHECKING:
    from openheim.acp.connection import Connection
    from openheim.acp.toolcalls import ToolCallTracker
    from openheim.core.turn_context import TurnContext

log = logging.getLogger(__name__)

TIMEOUT = 120.0
CAP = 65536
CONTROL_TIMEOUT = 10.0
CANCELLED = "Command cancelled."


@dataclass
class TerminalRun:
    output: str
    truncated: bool
    exit_code: int | None
    signal: str | None
    timed_out: bool = False


def format_run(run: TerminalRun, timeout: float) -> str:
    """The tool result for a finished terminal command, or the ToolExecutionError for a failed one."""
    output = run.output + ("\n[output truncated: only the end is shown]\n" if run.truncated else "")
    if run.timed_out:
        raise ToolExecutionError(f"Command timed out after {timeout:g} seconds and was killed.\nOutput: {output}")
    if run.signal:
        raise ToolExecutionError(f"Command was killed by signal {run.signal}.\nOutput: {output}")
    if run.exit_code not in (0, None):
        raise ToolExecutionError(f"Command failed with exit code {run.exit_code}:\nOutput: {output}")
    return output


class Terminals:
    """One session's terminal delegation; every terminal it creates is released."""

    def __init__(self, conn: Connection, session_id: str, tracker: ToolCallTracker | None = None) -> None:
        self.conn, self.session_id, self.tracker = conn, session_id, tracker

    def _params(self, terminal_id: str) -> dict:
        return {"sessionId": self.session_id, "terminalId": terminal_id}

    def run(
        self, command: str, ctx: TurnContext, timeout: float = TIMEOUT, cap: int = CAP, argv: list[str] | None = None
    ) -> str:
        """Run ``command`` (as ``sh -c``, or as ``argv``: the sandbox helper wrapping it) in the client's terminal."""
        if ctx.cancel.cancelled:
            raise ToolExecutionError(CANCELLED)
        program, *args = argv or ["sh", "-c", command]
        create = {
            "sessionId": self.session_id,
            "command": program,
            "args": args,
            "cwd": str(ctx.effective_cwd),
            "outputByteLimit": cap,
        }
        try:
            created = self.conn.request(
                "terminal/create", create, ctx.cancel, CONTROL_TIMEOUT, on_late=self._release_late
            )
        except Cancelled:
            raise ToolExecutionError(CANCELLED) from None
        except (RpcError, TimeoutError) as e:
            raise ToolExecutionError(f"Failed to execute command in the editor's terminal: {e}") from None
        terminal_id = created.get("terminalId") if isinstance(created, dict) else None
        if not isinstance(terminal_id, str):
            raise ToolExecutionError("Failed to execute command: the editor returned no terminal id")
        if self.tracker is not None and ctx.tool_call_id is not None:
            self.tracker.attach_terminal(ctx.tool_call_id, terminal_id)
        return format_run(self._supervise(terminal_id, ctx, timeout), timeout)

    def _supervise(self, terminal_id: str, ctx: TurnContext, timeout: float) -> TerminalRun:
        released = False
        try:
            timed_out = self._wait(terminal_id, ctx, timeout)
            output = self.conn.request("terminal/output", self._params(terminal_id), ctx.cancel, CONTROL_TIMEOUT)
            return _run_from(output, timed_out)
        except Cancelled:
            self._abandon(terminal_id)
            released = True
            raise ToolExecutionError(CANCELLED) from None
        except (RpcError, TimeoutError) as e:
            raise ToolExecutionError(f"the editor's terminal failed: {e}") from None
        finally:
            if not released:
                self._quietly("terminal/release", terminal_id)

    def _wait(self, terminal_id: str, ctx: TurnContext, timeout: float) -> bool:
        """True when the command ran out of time (it is killed then)."""
        try:
            self.conn.request("terminal/wait_for_exit", self._params(terminal_id), ctx.cancel, timeout)
            return False
        except TimeoutError:
            self._quietly("terminal/kill", terminal_id)
            return True

    def _abandon(self, terminal_id: str) -> None:
        """On cancel: kill and release without waiting for the answers (they arrive after we move on)."""
        self.conn.start_request("terminal/kill", self._params(terminal_id))
        self.conn.start_request("terminal/release", self._params(terminal_id))

    def _release_late(self, created: object) -> None:
        """terminal/create answered after we gave up on it: that terminal must not be left behind."""
        terminal_id = created.get("terminalId") if isinstance(created, dict) else None
        if isinstance(terminal_id, str):
            self._abandon(terminal_id)

    def _quietly(self, method: str, terminal_id: str) -> None:
        try:
            self.conn.request(method, self._params(terminal_id), None, CONTROL_TIMEOUT)
        except (RpcError, TimeoutError, Cancelled) as e:
            log.info("%s for %s failed: %s", method, terminal_id, e)


def _run_from(output: object, timed_out: bool) -> TerminalRun:
    output = output if isinstance(output, dict) else {}
    status = output.get("exitStatus")
    if not isinstance(status, dict):
        status = {}
    code = status.get("exitCode")
    return TerminalRun(
        str(output.get("output") or ""),
        bool(output.get("truncated")),
        code if isinstance(code, int) else None,
        status.get("signal") or None,
        timed_out,
    )
