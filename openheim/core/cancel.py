"""The cancel token every blocking step of a turn watches."""

from __future__ import annotations

import threading
from collections.abc import Callable


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
