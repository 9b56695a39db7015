"""The runtime an ACP server serves, built on first need so `initialize` is answered even when it cannot be.

An editor starts the agent before the user has run `openheim init` or set an API key. Exiting then leaves the
editor with a dead process and nothing to show, so the build waits until a request needs the runtime; if it
fails, the error is remembered and every such request is answered with it (see ``util.error_for``), telling the
user what to do. Environment variables cannot change in a running process, so the build is not retried:
restart the agent after fixing the setup.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from openheim.errors import Unavailable

if TYPE_CHECKING:
    from openheim.client import OpenheimClient

log = logging.getLogger(__name__)


class LazyClient:
    """An OpenheimClient built by ``build`` on the first ``get()``; a build error is kept and raised as Unavailable."""

    def __init__(self, build: Callable[[], OpenheimClient]) -> None:
        self._build = build
        self._client: OpenheimClient | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    @classmethod
    def ready(cls, client: OpenheimClient) -> LazyClient:
        lazy = cls(lambda: client)
        lazy._client = client
        return lazy

    @property
    def built(self) -> OpenheimClient | None:
        """The client if it has been built, without building it."""
        return self._client

    def get(self) -> OpenheimClient:
        with self._lock:
            if self._client is None and self._error is None:
                try:
                    self._client = self._build()
                except Exception as e:
                    log.error("%s", e)
                    self._error = e
            if self._error is not None:
                raise Unavailable(self._error)
            assert self._client is not None
            return self._client

    def close(self) -> None:
        """Close the client if it was built (its MCP servers and threads end)."""
        with self._lock:
            client = self._client
        if client is not None:
            client.close()
