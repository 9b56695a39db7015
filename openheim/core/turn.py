"""Cross-cutting controls of one turn: the cancel token and the per-turn tool context."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from openheim.core.client_io import ClientIo
    from openheim.core.events import StreamEvent
    from openheim.core.permission import PermissionGate


class CancelToken:
    """A thread-safe cancel flag that also runs unblock actions registered by whoever is blocked.

    Blocking code registers an action (shut a socket down, kill a process group, answer a
    future) with ``on_cancel`` and removes it with the returned handle when it is done.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._actions: dict[int, Callable[[], object]] = {}
        self._next = 0
        self.reason: str | None = None  # why, when not the user (e.g. a budget); tools' results say it

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str | None = None) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            actions = list(self._actions.values())
            self._actions.clear()
        for action in actions:
            try:
                action()
            except Exception:  # an unblock action must never break cancellation
                pass

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout`` seconds; True if cancelled meanwhile."""
        return self._event.wait(timeout)

    def on_cancel(self, action: Callable[[], object]) -> Callable[[], None]:
        """Run ``action`` when cancelled (at once if already); returns a remover."""
        with self._lock:
            if not self._event.is_set():
                key = self._next
                self._next += 1
                self._actions[key] = action

                def remove() -> None:
                    with self._lock:
                        self._actions.pop(key, None)

                return remove
        action()
        return lambda: None


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

    @property
    def effective_cwd(self) -> Path:
        """Where relative paths start: the session cwd (the runtime keeps it inside work_dir)."""
        return self.cwd or self.work_dir
