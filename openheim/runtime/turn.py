"""Turn: one prompt running on its own worker thread, its events handed to the front end's thread.

Every front end (run, ACP, the TUI, serve, an embedder) starts turns through
``Session.start_turn`` and consumes the same thing: a bounded batch queue of StreamEvents,
``cancel()`` from any thread, and an outcome that is known at the latest ``CANCEL_GRACE`` seconds
after a cancel, even if something below will not let go.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from openheim.core.models import AgentResult, Budget, StopReason
from openheim.core.turn_context import CancelToken

if TYPE_CHECKING:
    from openheim.core.events import StreamEvent
    from openheim.core.tools import ToolView

CANCEL_GRACE = 0.8  # seconds a cancelled turn gets to wind down before its outcome is "cancelled" anyway
FOLLOW_WAIT = 2.0  # seconds a turn started right after a cancel waits for the cancelled one to let go
CAPACITY = 4096  # events the worker may run ahead of the front end before it waits
DENSE = 0.002  # two hand-overs this close together: the stream is pouring in
LINGER = 0.004  # then a batch waits this long for the events right behind it (well under 50 ms)

Body = Callable[[Callable[["StreamEvent"], None], CancelToken, Callable[[], None]], AgentResult]
SYNC_WAIT = 5.0  # seconds the worker waits for a stalled front end to catch up before it goes on
Present = Callable[[str, "dict | None"], "ToolView"]


class EventBuffer:
    """A bounded hand-off from one producer to one consumer; ``take`` returns everything queued at once."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._items: deque = deque()
        self._capacity = capacity
        # held through the lock itself: entering the Condition adds a Python-level call to every event's put
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._closed = False
        self._consumer_waiting = False
        self._producer_waiting = False
        self._put = 0  # items queued so far
        self._handed = 0  # items handed to the consumer so far
        self._done = 0  # items the consumer has finished with (it came back for more)
        self._consuming = False  # a consumer has started taking
        self._syncing = 0  # producers waiting in wait_handled

    def put(self, item: object) -> None:
        """Queue ``item``; waits while the buffer is full; dropped once the buffer is closed."""
        with self._lock:
            while len(self._items) >= self._capacity and not self._closed:
                self._producer_waiting = True
                self._cond.wait()
            if self._closed:
                return
            self._items.append(item)
            self._put += 1
            if self._consumer_waiting:
                self._consumer_waiting = False
                self._cond.notify_all()

    def close(self) -> None:
        """No more items: the consumer gets what is queued, then the end."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()

    @property
    def ended(self) -> bool:
        with self._lock:
            return self._closed and not self._items

    def wait_handled(self, timeout: float = SYNC_WAIT) -> None:
        """Wait until the consumer has handled every item queued so far (when one is consuming)."""
        with self._lock:
            target = self._put
            self._syncing += 1
            self._cond.notify_all()  # a lingering consumer takes what there is now
            try:
                self._cond.wait_for(
                    lambda: (
                        self._closed
                        or not self._consuming
                        or self._done >= target
                        or (self._consumer_waiting and not self._items and self._handed >= target)
                    ),
                    timeout,
                )
            finally:
                self._syncing -= 1

    def linger(self, seconds: float) -> None:
        """Give items right behind the last ones ``seconds`` to gather; over at once when the stream closes or
        the producer waits for the consumer (so the end of a turn, or a permission question, is not held up)."""
        with self._lock:
            self._cond.wait_for(lambda: self._closed or self._syncing > 0, seconds)

    def take(self, timeout: float | None = None) -> tuple[list, bool]:
        """(everything queued, whether the stream has ended); waits up to ``timeout`` for the first item."""
        with self._lock:
            self._consuming = True
            if self._done != self._handed:  # coming back for more: the last batch is handled
                self._done = self._handed
                self._cond.notify_all()
            if not self._items and not self._closed and timeout != 0:
                self._consumer_waiting = True
                self._cond.wait(timeout)
                self._consumer_waiting = False
            batch = list(self._items)
            self._items.clear()
            self._handed += len(batch)
            if batch and self._producer_waiting:
                self._producer_waiting = False
                self._cond.notify_all()
            return batch, self._closed and not self._items


class Turn:
    """A running prompt: iterate its events, ``cancel()`` it from any thread, ``wait()`` for its ``result``."""

    def __init__(
        self,
        session_id: str,
        body: Body,
        present: Present | None = None,
        after: Turn | None = None,
        capacity: int = CAPACITY,
        timeout: float | None = None,
    ) -> None:
        self.session_id = session_id
        self.token = CancelToken()
        self._body = body
        self._present = present
        self._after = after  # a cancelled turn on the same session that must let go first
        self._buffer = EventBuffer(capacity)
        self._lock = threading.Lock()
        self._settled = threading.Event()
        self._result: AgentResult | None = None
        self._error: BaseException | None = None
        self._cancelled = False
        self._completed = False
        self._timeout = timeout  # the time budget: seconds until the turn is stopped as ``budget``
        self._timer: threading.Timer | None = None
        self._started = 0.0
        self._budget: Budget | None = None
        self._thread = threading.Thread(target=self._work, name=f"openheim-turn-{session_id[:8]}", daemon=True)

    # --- lifecycle -----------------------------------------------------------------

    def start(self) -> Turn:
        self._started = time.monotonic()
        if self._timeout is not None:
            self._timer = threading.Timer(self._timeout, self._out_of_time)
            self._timer.daemon = True
            self._timer.start()
        self._thread.start()
        return self

    def _out_of_time(self) -> None:
        """The time budget ran out: cancel like ``cancel()`` does, but the outcome is ``budget``."""
        assert self._timeout is not None
        with self._lock:
            if self._settled.is_set() or self._cancelled:
                return
            self._budget = Budget("time", self._timeout, time.monotonic() - self._started)
        self.token.cancel(f"Cancelled: the turn's time budget ({self._timeout:g}s) ran out.")
        timer = threading.Timer(CANCEL_GRACE, self._settle, (None, None, False))
        timer.daemon = True
        timer.start()

    def _work(self) -> None:
        if self._after is not None:
            self._after.join(FOLLOW_WAIT)
            self._after = None
        try:
            if self.token.cancelled:
                self._settle(None, None)
            else:
                self._settle(self._body(self._buffer.put, self.token, self._buffer.wait_handled), None)
        except BaseException as e:  # handed to whoever reads the result
            self._settle(None, e)

    def _settle(self, result: AgentResult | None, error: BaseException | None, by_worker: bool = True) -> None:
        with self._lock:
            if self._settled.is_set():
                return
            self._result, self._error, self._completed = result, error, by_worker
            self._settled.set()
        if self._timer is not None:
            self._timer.cancel()
        self._buffer.close()

    def cancel(self) -> None:
        """Stop the turn; its outcome is "cancelled" once it lets go, or after CANCEL_GRACE at the latest."""
        with self._lock:
            if self._settled.is_set() or self._cancelled:
                return
            self._cancelled = True
        self.token.cancel()
        timer = threading.Timer(CANCEL_GRACE, self._settle, (None, None, False))
        timer.daemon = True
        timer.start()

    @property
    def cancelled(self) -> bool:
        """Whether cancel() was called before the turn ended."""
        return self._cancelled

    @property
    def finished(self) -> bool:
        """Whether the outcome is known (events may still be queued for the consumer)."""
        return self._settled.is_set()

    @property
    def completed(self) -> bool:
        """Whether the worker itself ended the turn (not the cancel grace period running out)."""
        return self._settled.is_set() and self._completed

    @property
    def running(self) -> bool:
        """Whether the worker thread still runs (it may outlive a cancelled turn's outcome)."""
        return self._thread.is_alive() or not self._thread.ident

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the outcome is known; False if ``timeout`` passed first."""
        return self._settled.wait(timeout)

    def join(self, timeout: float | None = None) -> bool:
        """Block until the worker thread itself has ended; False if ``timeout`` passed first."""
        if self._thread.ident:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def result(self) -> AgentResult:
        """The outcome (waits for it): a cancelled turn ends ``cancelled``; a failed one raises its error."""
        self._settled.wait()
        if self._cancelled:
            if self._result is None:
                return AgentResult(None, 0, StopReason.CANCELLED)
            return replace(self._result, stop_reason=StopReason.CANCELLED)
        if self._budget is not None and (self._result is None or self._result.stop_reason is StopReason.CANCELLED):
            if self._result is None:
                return AgentResult(None, 0, StopReason.BUDGET, budget=self._budget)
            return replace(self._result, stop_reason=StopReason.BUDGET, budget=self._budget)
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    @property
    def error(self) -> BaseException | None:
        """The exception the turn failed with (None when it succeeded or was cancelled)."""
        self._settled.wait()
        return None if self._cancelled or self._budget is not None else self._error

    # --- events ---------------------------------------------------------------------

    def batches(self) -> Iterator[list[StreamEvent]]:
        """Lists of events as they arrive (everything queued at once); ends when the turn ends.

        While events pour in (a fast stream), each batch lingers a moment to gather the ones right
        behind it, so the two threads trade the GIL hundreds of times a second, not per event; a
        quiet stream is handed over at once.
        """
        last = -1.0
        while True:
            batch, ended = self._buffer.take()
            now = time.monotonic()
            if batch and not ended and now - last < DENSE:
                self._buffer.linger(LINGER)
                more, ended = self._buffer.take(0)
                batch += more
            last = now
            if batch:
                yield batch
            if ended:
                return

    def __iter__(self) -> Iterator[StreamEvent]:
        for batch in self.batches():
            yield from batch

    def poll(self, timeout: float = 0) -> list[StreamEvent]:
        """Whatever events are queued now (waiting up to ``timeout`` for one); for UI loops that poll."""
        return self._buffer.take(timeout)[0]

    @property
    def ended(self) -> bool:
        """True once the turn has ended and every event has been taken."""
        return self._buffer.ended

    def present(self, tool_name: str, args: dict | None) -> ToolView:
        """How a tool call of this turn looks (title, kind, locations, diff preview)."""
        from openheim.core.tools import ToolView

        if self._present is None:
            return ToolView(tool_name)
        return self._present(tool_name, args)
