"""Live sessions: per-session state and the bounded map that holds them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.errors import TooManySessions

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.config.schema import McpServerConfig
    from openheim.conversation.history import Conversation
    from openheim.core.context import ContextFitter
    from openheim.runtime.session_tools import SessionTools
    from openheim.runtime.turn import Turn

IDLE_LIMIT_SECS = 7 * 24 * 3600
MAX_LIVE_SESSIONS = 2048  # twice serve's socket cap: every connected client has room for a session


@dataclass(eq=False)
class SessionState:
    """A live session: its config, directory, mode, approvals and cached conversation."""

    id: str
    config: AgentConfig
    cwd: Path
    skills: list[str] = field(default_factory=list)
    mode: str = "code"
    approvals: dict = field(default_factory=dict)
    last_active: float = field(default_factory=time.monotonic)
    fitter: ContextFitter | None = None  # kept across turns: learned limits and ratios carry over
    conversation: Conversation | None = None  # the last turn's conversation, reused while disk agrees
    turn: Turn | None = None  # the latest turn started through start_turn
    turn_lock: threading.Lock = field(default_factory=threading.Lock)
    tools: SessionTools | None = None  # with MCP servers: the session's tool set; None: the runtime's registry
    mcp_servers: list[McpServerConfig] = field(default_factory=list)  # the session's own servers, as given
    releases: list[Callable[[], object]] = field(default_factory=list)  # run once when the session goes away
    holders: int = 0  # connected clients showing this session: while any does, it is never evicted
    spent: float = 0.0  # US dollars its turns have spent in this process (priced models, subagents included)
    hooked: bool = False  # its session_start hooks have run

    @property
    def in_flight(self) -> bool:
        return self.turn is not None and self.turn.running

    @property
    def evictable(self) -> bool:
        return not self.holders and not self.in_flight

    def stop(self) -> None:
        """Cancel whatever runs on this session."""
        turn = self.turn
        if turn is not None and turn.running:
            turn.cancel()

    def touch(self) -> None:
        self.last_active = time.monotonic()

    def release(self) -> None:
        """Let go of what the session holds outside itself (its MCP servers stop in the background)."""
        releases, self.releases = self.releases, []
        for release in releases:
            release()


class SessionMap:
    """Thread-safe map of live sessions; evicts idle ones, never one mid-prompt."""

    def __init__(self, idle_limit: float = IDLE_LIMIT_SECS, capacity: int = MAX_LIVE_SESSIONS) -> None:
        self._sessions: dict[str, SessionState] = {}
        self._lock = threading.Lock()
        self.idle_limit = idle_limit
        self.capacity = capacity

    def get(self, session_id: str) -> SessionState | None:
        with self._lock:
            session = self._sessions.get(session_id)
        if session:
            session.touch()
        return session

    def insert(self, session: SessionState, hold: bool = False) -> SessionState:
        """Add a session, or return the live one with that id (its state wins); ``hold``: a connected client
        shows it (see let_go). TooManySessions when the map is full of sessions that may not be evicted."""
        with self._lock:
            live = self._sessions.get(session.id)
            if live is None:
                self._evict()
                if len(self._sessions) >= self.capacity:
                    raise TooManySessions(self.capacity)
                self._sessions[session.id] = live = session
            live.touch()
            if hold:
                live.holders += 1
            return live

    def let_go(self, session_id: str) -> None:
        """A client that held the session no longer shows it: once idle it may be evicted again."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and session.holders:
                session.holders -= 1

    def has_room(self) -> bool:
        """Whether a new session could be inserted now (a hint; insert decides)."""
        with self._lock:
            return len(self._sessions) < self.capacity or any(s.evictable for s in self._sessions.values())

    def remove(self, session_id: str) -> SessionState | None:
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is not None:
            session.release()
        return session

    def release_all(self) -> None:
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            session.release()

    def all(self) -> list[SessionState]:
        with self._lock:
            return list(self._sessions.values())

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def _evict(self) -> None:
        """Drop sessions idle past the limit, then the least recently used until one more fits; a session
        with a running turn or a connected client is never dropped."""
        now = time.monotonic()
        for sid, s in list(self._sessions.items()):
            if now - s.last_active > self.idle_limit and s.evictable:
                del self._sessions[sid]
                s.release()
        if len(self._sessions) < self.capacity:
            return
        for s in sorted(self._sessions.values(), key=lambda s: s.last_active):
            if len(self._sessions) < self.capacity:
                break
            if s.evictable:
                del self._sessions[s.id]
                s.release()
