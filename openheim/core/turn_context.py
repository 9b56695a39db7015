"""What a tool call can see of its turn: the per-turn tool context and the client I/O it may delegate to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from openheim.core.cancel import CancelToken
from openheim.core.models import Usage
from openheim.core.spend import Spend

if TYPE_CHECKING:
    from openheim.core.events import StreamEvent
    from openheim.core.hooks import HookRunner
    from openheim.core.permission import PermissionGate

__all__ = ["CancelToken", "ClientIo", "TurnContext"]


@runtime_checkable
class ClientIo(Protocol):
    """File access through the client (its unsaved buffers win), and commands in its terminal.

    Tools fall back to the local disk and a local shell for whatever the client cannot do.
    """

    @property
    def can_read(self) -> bool: ...

    @property
    def can_write(self) -> bool: ...

    @property
    def can_run_commands(self) -> bool: ...

    def read_text_file(self, path: Path, line: int | None, limit: int | None, cancel: CancelToken | None) -> str: ...

    def write_text_file(self, path: Path, content: str, cancel: CancelToken | None) -> None: ...

    def run_command(
        self, command: str, ctx: TurnContext, timeout: float, cap: int, argv: list[str] | None = None
    ) -> str:
        """Run ``command`` in the client's terminal; the result text, or a ToolExecutionError.

        ``argv``: the program and arguments to run instead of ``sh -c command`` (the sandbox helper)."""
        ...


class TurnUsage:
    """The tokens one turn used, its subagents' included (they share it through their context copies):
    what the turn reports and what its token budget counts."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self.total = Usage()

    def add(self, usage: Usage) -> None:
        with self._lock:
            self.total = self.total + usage


@dataclass(eq=False)
class TurnContext:
    """What a tool call can see of its turn: cancel token, gate, sandbox and client I/O."""

    cancel: CancelToken = field(default_factory=CancelToken)
    work_dir: Path = field(default_factory=Path.cwd)
    cwd: Path | None = None
    gate: PermissionGate | None = None
    client_io: ClientIo | None = None
    session_id: str | None = None
    tool_call_id: str | None = None  # set on the per-call copy a tool receives
    secret_env_vars: frozenset[str] = frozenset()
    emit: Callable[[StreamEvent], None] | None = None  # a tool's progress events, to the turn's front end
    # Wait until the front end has handled every event so far, so a request to the client made next
    # (a diff's file read, a tool's fs or terminal call) reaches it after them.
    sync: Callable[[], None] | None = None
    usage: TurnUsage = field(default_factory=lambda: TurnUsage())  # the whole turn's, subagents' included
    spend: Spend = field(default_factory=Spend)  # the dollars the turn spends, shared with its subagents
    hooks: HookRunner | None = None  # the user's pre_tool / post_tool hooks

    @property
    def effective_cwd(self) -> Path:
        """Where relative paths start: the session cwd (the runtime keeps it inside work_dir)."""
        return self.cwd or self.work_dir
