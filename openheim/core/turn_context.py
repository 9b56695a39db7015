"""What a tool call can see of its turn: the per-turn tool context and the client I/O it may delegate to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from openheim.core.cancel import CancelToken
from openheim.core.spend import Spend
from openheim.records import DataclassRepr

if TYPE_CHECKING:
    from openheim.core.events import StreamEvent
    from openheim.core.hooks import HookRunner
    from openheim.core.models import Usage
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

        from openheim.core.models import Usage

        self._lock = threading.Lock()
        self.total = Usage()

    def add(self, usage: Usage) -> None:
        with self._lock:
            self.total = self.total + usage


@dataclass(init=False, repr=False, eq=False)
class TurnContext(DataclassRepr):
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

    def __init__(
        self,
        cancel: CancelToken | None = None,
        work_dir: Path | None = None,
        cwd: Path | None = None,
        gate: PermissionGate | None = None,
        client_io: ClientIo | None = None,
        session_id: str | None = None,
        tool_call_id: str | None = None,
        secret_env_vars: frozenset[str] = frozenset(),
        emit: Callable[[StreamEvent], None] | None = None,
        sync: Callable[[], None] | None = None,
        usage: TurnUsage | None = None,
        spend: Spend | None = None,
        hooks: HookRunner | None = None,
    ) -> None:
        self.cancel = CancelToken() if cancel is None else cancel
        self.work_dir = Path.cwd() if work_dir is None else work_dir
        self.cwd = cwd
        self.gate = gate
        self.client_io = client_io
        self.session_id = session_id
        self.tool_call_id = tool_call_id
        self.secret_env_vars = secret_env_vars
        self.emit = emit
        self.sync = sync
        self.usage = TurnUsage() if usage is None else usage
        self.spend = Spend() if spend is None else spend
        self.hooks = hooks

    @property
    def effective_cwd(self) -> Path:
        """Where relative paths start: the session cwd (the runtime keeps it inside work_dir)."""
        return self.cwd or self.work_dir
