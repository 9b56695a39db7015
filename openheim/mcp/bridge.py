"""The bridge: one asyncio event loop on a daemon thread, where every MCP server of a runtime lives.

The ``mcp`` SDK is async (anyio) and its transports must be entered and left in the same task, so
each server is one long-lived owner task on this loop (see ``server.py``). Worker threads submit
coroutines with ``run_coroutine_threadsafe`` and wait on the returned future with a deadline.
The SDK is imported on a thread of its own, off the caller's critical path, while the loop already runs:
stdio servers are spawned meanwhile (``sdk`` is awaited once a server's process is started), so a server's
own start-up overlaps ours.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import os
import signal
import threading
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)

INSTALL_HINT = "the MCP client is not available: {e} (install it with: pip install 'mcp>=2.3,<3')"


def load_sdk() -> None:
    """Import what the client uses of the SDK: the session and, for stdio, its message types (the HTTP and SSE
    transports load when such a server starts)."""
    import mcp.client.session
    import mcp.shared.message  # noqa: F401


def kill_group(pid: int) -> None:
    """SIGKILL what is left of a server's process group (it was started in a session of its own)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


class Bridge:
    """The event-loop thread. ``submit`` runs a coroutine on it; ``stop`` ends the thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._sdk: concurrent.futures.Future[str | None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, name="openheim-mcp", daemon=True)
        self._stopped = False
        self._thread.start()
        threading.Thread(target=self._load_sdk, name="openheim-mcp-import", daemon=True).start()

    def _load_sdk(self) -> None:
        try:
            error = _import_sdk()
        except BaseException as e:  # a broken install: every server says so instead of waiting forever
            error = INSTALL_HINT.format(e=f"{type(e).__name__}: {e}")
        self._sdk.set_result(error)

    @property
    def import_error(self) -> str | None:
        """Why the SDK could not be loaded, None when it loaded (waits for its import; never on the loop)."""
        return self._sdk.result()

    async def sdk(self) -> str | None:
        """On the loop: wait for the SDK's import; the reason it failed, or None."""
        # shielded: a waiter that is cancelled (a server given up on) must not cancel the import's future itself
        return await asyncio.shield(asyncio.wrap_future(self._sdk))

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self._drain()

    def _drain(self) -> None:
        pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        try:
            # The SDK's streams and generators left in reference cycles are finalised now, while their loop
            # can still run what they schedule (later, on a closed loop, each is "Event loop is closed").
            gc.collect()
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.run_until_complete(asyncio.sleep(0))
        finally:
            self.loop.close()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stopped

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        """Run ``coro`` on the loop; the future resolves (or raises) when it ends."""
        if not self.alive:
            coro.close()
            future: concurrent.futures.Future = concurrent.futures.Future()
            future.set_exception(RuntimeError("the MCP bridge is closed"))
            return future
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self, timeout: float = 2.0) -> None:
        """End the loop (cancelling whatever still runs on it) and join the thread."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # already closed
            return
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)


def _import_sdk() -> str | None:
    """None when the SDK loaded; else the one-line reason. A rare import-lock clash with the main
    thread's own imports passes on a second try."""
    error = None
    for _ in range(2):
        try:
            load_sdk()
            return None
        except ImportError as e:
            error = INSTALL_HINT.format(e=e)
    log.warning("%s", error)
    return error
