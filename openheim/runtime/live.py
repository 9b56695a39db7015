"""Live sessions: the state of one (SessionState) and the bounded map that holds them (SessionMap)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

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


@dataclass(init=False, repr=False, eq=False)
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

    def __init__(
        self,
        id: str,
        config: AgentConfig,
        cwd: Path,
        skills: list[str] | None = None,
        mode: str = "code",
        approvals: dict | None = None,
        last_active: float | None = None,
        fitter: ContextFitter | None = None,
        conversation: Conversation | None = None,
        turn: Turn | None = None,
        turn_lock: threading.Lock | None = None,
        tools: SessionTools | None = None,
        mcp_servers: list[McpServerConfig] | None = None,
        releases: list[Callable[[], object]] | None = None,
        holders: int = 0,
        spent: float = 0.0,
        hooked: bool = False,
    ) -> None:
        self.id = id
        self.config = config
        self.cwd = cwd
        self.skills = [] if skills is None else skills
        self.mode = mode
        self.approvals = {} if approvals is None else approvals
        self.last_active = time.monotonic() if last_active is None else last_active
        self.fitter = fitter
        self.conversation = conversation
        self.turn = turn
        self.turn_lock = threading.Lock() if turn_lock is None else turn_lock
        self.tools = tools
        self.mcp_servers = [] if mcp_servers is None else mcp_servers
        self.releases = [] if releases is None else releases
        self.holders = holders
        self.spent = spent
        self.hooked = hooked

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


class Entry(Protocol):
    """What the map holds: a session's id and its live state (openheim.runtime.session.Session is one)."""

    @property
    def id(self) -> str: ...

    @property
    def live(self) -> SessionState: ...


S = TypeVar("S", bound=Entry)


class SessionMap(Generic[S]):
    """Thread-safe map of live sessions; evicts idle ones, never one mid-prompt."""

    def __init__(self, idle_limit: float = IDLE_LIMIT_SECS, capacity: int = MAX_LIVE_SESSIONS) -> None:
        self._sessions: dict[str, S] = {}
        self._lock = threading.Lock()
        self.idle_limit = idle_limit
        self.capacity = capacity

    def get(self, session_id: str) -> S | None:
        with self._lock:
            session = self._sessions.get(session_id)
        if session:
            session.live.touch()
        return session

    def insert(self, session: S, hold: bool = False) -> S:
        """Add a session, or return the live one with that id (its state wins); ``hold``: a connected client
        shows it (see let_go). TooManySessions when the map is full of sessions that may not be evicted."""
        with self._lock:
            live = self._sessions.get(session.id)
            if live is None:
                self._evict()
                if len(self._sessions) >= self.capacity:
                    raise TooManySessions(self.capacity)
                self._sessions[session.id] = live = session
            live.live.touch()
            if hold:
                live.live.holders += 1
            return live

    def let_go(self, session_id: str) -> None:
        """A client that held the session no longer shows it: once idle it may be evicted again."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and session.live.holders:
                session.live.holders -= 1

    def has_room(self) -> bool:
        """Whether a new session could be inserted now (a hint; insert decides)."""
        with self._lock:
            return len(self._sessions) < self.capacity or any(s.live.evictable for s in self._sessions.values())

    def remove(self, session_id: str) -> S | None:
        with self._lock:
            session = self._sessions.pop(session_id, None)
        if session is not None:
            session.live.release()
        return session

    def release_all(self) -> None:
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            session.live.release()

    def all(self) -> list[S]:
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
            if now - s.live.last_active > self.idle_limit and s.live.evictable:
                del self._sessions[sid]
                s.live.release()
        if len(self._sessions) < self.capacity:
            return
        for s in sorted(self._sessions.values(), key=lambda s: s.live.last_active):
            if len(self._sessions) < self.capacity:
                break
            if s.live.evictable:
                del self._sessions[s.id]
                s.live.release()
