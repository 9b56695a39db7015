"""The TUI's permission gate: the agent's tool thread hands each request to the UI thread and waits."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from openheim.core.permission import Decision, FailClosedGate, PermissionRequest

if TYPE_CHECKING:
    from openheim.core.turn_context import CancelToken

POLL = 0.25  # seconds between checks that the UI is still there


class Ask:
    """One pending question; ``answer`` is set by the UI thread."""

    def __init__(self, req: PermissionRequest, seq: int) -> None:
        self.req, self.seq = req, seq
        self.answer: Decision | None = None
        self.done = threading.Event()


class TuiGate(FailClosedGate):
    """Queues requests for the UI, one shown at a time; cancel, close or no answer rejects (fail-closed)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asks: list[Ask] = []
        self._closed = False
        self._seq = 0

    def ask(self, req: PermissionRequest, cancel: CancelToken | None) -> Decision | None:
        with self._lock:
            if self._closed:
                return None
            self._seq += 1
            pending = Ask(req, self._seq)
            self._asks.append(pending)
        remove = cancel.on_cancel(pending.done.set) if cancel is not None else (lambda: None)
        try:
            while not pending.done.wait(POLL):
                if self._closed:
                    break
        finally:
            remove()
            self._drop(pending)
        if self._closed or (cancel is not None and cancel.cancelled):
            return None
        return pending.answer

    def _drop(self, pending: Ask) -> None:
        with self._lock:
            if pending in self._asks:
                self._asks.remove(pending)

    def current(self) -> Ask | None:
        """The request to show now (the oldest one still waiting)."""
        with self._lock:
            return self._asks[0] if self._asks else None

    def waiting(self) -> int:
        with self._lock:
            return len(self._asks)

    def answer(self, pending: Ask, decision: Decision) -> None:
        pending.answer = decision
        self._drop(pending)
        pending.done.set()

    def close(self) -> None:
        """The UI is going away: every waiting and future request is rejected."""
        with self._lock:
            self._closed = True
            asks = list(self._asks)
        for pending in asks:
            pending.done.set()
