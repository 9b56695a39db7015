"""The one place openheim installs signal handlers.

Every front end (run, acp, serve, the chat) routes SIGINT/SIGTERM/SIGHUP through a ``SignalRoute`` while it
runs and gets the old handlers back when it ends; a forked tool child puts the defaults back with
``restore_defaults``. What a signal means (kill the tools' process groups, cancel the turn, exit with
128+signal) is the front end's callback: ``exit_code`` names the convention.
"""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the sandbox helper imports this once per command
if TYPE_CHECKING:
    import signal
    from types import TracebackType
    from typing import Any
else:
    import _signal as signal  # the C module: `signal` builds enums, milliseconds per sandboxed command

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

OnSignal = Callable[[int], None]


def exit_code(signum: int) -> int:
    """The exit status of a process that stops because of ``signum`` (130 for SIGINT)."""
    return 128 + signum


class SignalRoute:
    """Send ``signals`` to ``on_signal(signum)`` until ``restore()`` (or the end of a ``with`` block).

    Only the main thread may install handlers (Python's rule); the callback runs there too, between
    bytecodes, so it should only flag, cancel or raise.
    """

    def __init__(
        self, on_signal: OnSignal, signals: tuple[int, ...] = STOP_SIGNALS, keep_custom_sigint: bool = False
    ) -> None:
        self._old: dict[int, Any] = {}  # what signal.signal returned: a handler, SIG_DFL/SIG_IGN or None
        for sig in signals:
            if keep_custom_sigint and sig == signal.SIGINT and signal.getsignal(sig) != signal.default_int_handler:
                continue  # someone (a test harness, an embedder) handles Ctrl-C already
            self._old[sig] = signal.signal(sig, lambda signum, frame: on_signal(signum))

    def restore(self) -> None:
        """Put back the handlers that were there before (a signal ignored meanwhile stays ignored)."""
        for sig, old in self._old.items():
            if signal.getsignal(sig) != signal.SIG_IGN:
                signal.signal(sig, old)
        self._old.clear()

    def __enter__(self) -> SignalRoute:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.restore()


def ignore(*signals: int) -> None:
    """Ignore ``signals`` from now on (e.g. a late echo of Ctrl-C while the process exits)."""
    for sig in signals:
        signal.signal(sig, signal.SIG_IGN)


def restore_defaults(*signals: int) -> None:
    """The default action for ``signals`` (in a forked child that must not run the parent's handlers)."""
    for sig in signals:
        signal.signal(sig, signal.SIG_DFL)
