"""Runtime: the live sessions of one process (new, load, list, delete, close) over the shared Services."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.conversation.history import check_session_id
from openheim.conversation.lease import Lease
from openheim.core.mode import AgentMode
from openheim.core.models import Message
from openheim.errors import InvalidArgument, NotFound, OpenheimError, ParseError, SessionBusy, TooManySessions
from openheim.runtime.live import SessionMap, SessionState
from openheim.runtime.services import RuntimeSettings, Services
from openheim.runtime.session import Session

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.config.schema import McpServerConfig
    from openheim.conversation.history import ConversationMeta
    from openheim.core.llm.adapters import BlockingLlm
    from openheim.core.llm.base import LlmClient
    from openheim.core.tools import ToolRegistry
    from openheim.mcp.status import McpServerStatus
    from openheim.memory.long_term import LongTermMemory

__all__ = ["Runtime", "RuntimeSettings"]


class Runtime:
    """The live map of sessions and the services they share."""

    def __init__(
        self,
        settings: RuntimeSettings,
        registry: ToolRegistry,
        llm_factory: Callable[[AgentConfig], LlmClient | BlockingLlm] | None = None,
        long_term_memory: LongTermMemory | None = None,
    ) -> None:
        self.services = Services(settings, registry, llm_factory, long_term_memory)
        self.sessions: SessionMap[Session] = SessionMap()

    # --- opening sessions ----------------------------------------------------------------

    def new(
        self,
        cwd: Path,
        model: str | None = None,
        provider: str | None = None,
        skills: list[str] | tuple[str, ...] = (),
        mcp_servers: list[McpServerConfig] | None = None,
        hold: bool = False,
    ) -> Session:
        """A new live session; ``hold``: a connected client shows it, so it is not evicted until let go."""
        services = self.services
        services.sandbox_for(cwd)
        if not self.sessions.has_room():  # before any MCP server of the session starts
            raise TooManySessions(self.sessions.capacity)
        merged = list(dict.fromkeys([*services.config.default_skills, *skills]))
        if provider is None and model is None:
            provider, model = services.settings.default_provider, services.settings.default_model
        live = SessionState(str(uuid.uuid4()), services.resolve_model(provider, model), cwd, merged)
        return self._insert(live, mcp_servers or [], hold)

    def _insert(self, live: SessionState, servers: list[McpServerConfig], hold: bool) -> Session:
        self.services.mcp.attach(live, self.services.sandbox_for(live.cwd)[0], servers)
        session = Session(live, self.services, self.sessions, self._fork)
        try:
            inserted = self.sessions.insert(session, hold)
        except TooManySessions:
            live.release()
            raise
        if inserted is not session:  # another thread made it live meanwhile: its state wins
            live.release()
        return inserted

    def live(self, session_id: str) -> Session:
        """The live session ``session_id`` (InvalidArgument for a malformed id, NotFound if it is not live)."""
        sid = check_session_id(session_id)
        session = self.sessions.get(sid)
        if session is None:
            raise NotFound(f"session not found: {sid}")
        return session

    def resume(
        self,
        session_id: str,
        cwd: Path | None = None,
        mcp_servers: list[McpServerConfig] | None = None,
        hold: bool = False,
    ) -> tuple[Session, list[Message], str | None]:
        """Attach to a stored conversation: (the live session, its stored messages, a warning or None). A live
        session keeps its state (``mcp_servers``, when given and different, replace its own servers)."""
        history = self.services.conversations.history
        sid = history.resolve_id(session_id)
        conv = history.load(sid)
        live = self.sessions.get(sid)
        if live is not None:
            if live.busy:
                raise SessionBusy(sid)
            if mcp_servers is not None and list(mcp_servers) != live.live.mcp_servers:
                self.services.mcp.attach(live.live, self.services.sandbox_for(live.cwd)[0], mcp_servers)
            return self.sessions.insert(live, hold), conv.messages, None
        session_cwd = cwd or (Path(conv.meta.cwd) if conv.meta.cwd else Path.cwd())
        self.services.sandbox_for(session_cwd)
        mode = self._stored_mode(sid, conv.meta.mode)
        cfg, warning = self._restore_model(conv.meta.provider, conv.meta.model)
        state = SessionState(sid, cfg, session_cwd, list(conv.meta.skills), mode)
        if not self.sessions.has_room():
            raise TooManySessions(self.sessions.capacity)
        return self._insert(state, mcp_servers or [], hold), conv.messages, warning

    def _stored_mode(self, session_id: str, mode: str) -> str:
        try:
            return AgentMode.parse(mode).value
        except InvalidArgument:
            path = self.services.conversations.history.meta_path(session_id)
            raise ParseError(
                f'conversation metadata {path} has an unknown mode {mode!r}; set "mode" to one '
                f"of {', '.join(m.value for m in AgentMode)} in that file"
            ) from None

    def _restore_model(self, provider: str | None, model: str | None) -> tuple[AgentConfig, str | None]:
        resolve = self.services.resolve_model
        try:
            return resolve(provider or None, model or None), None
        except OpenheimError as e:
            default = self.services.config.default_provider
            warning = (
                f"[warning] Could not restore this session's provider '{provider}' ({e}). "
                f"Falling back to the default provider '{default}'."
            )
            return resolve(None, None), warning

    # --- stored sessions ----------------------------------------------------------------

    def stored(self, cwd: str | None = None, include_failed: bool = False) -> list[ConversationMeta]:
        """Stored sessions, newest first; those whose turn failed before any reply only with ``include_failed``."""
        metas = self.services.conversations.history.list(include_failed=include_failed)
        return [m for m in metas if cwd is None or m.cwd == cwd]

    def discard(self, session_id: str) -> None:
        history = self.services.conversations.history
        sid = history.resolve_id(session_id)
        live = self.sessions.get(sid)
        if live is not None and live.busy:
            raise SessionBusy(sid)
        self.sessions.remove(sid)
        history.delete(sid)

    def fork_stored(self, session_id: str) -> str:
        """A new stored session starting where ``session_id`` is now: its messages and compactions copied,
        its checkpoints shared (undo in either session restores the same copies). The new session's id."""
        history = self.services.conversations.history
        sid = history.resolve_id(session_id)
        with Lease.acquire(history.history_dir, sid):
            source = history.load(sid)
        meta = source.meta
        fork = history.create(
            model=meta.model, provider=meta.provider, skills=meta.skills, cwd=meta.cwd, mode=meta.mode
        )
        fork.messages, fork.compactions = list(source.messages), list(source.compactions)
        fork.meta.title, fork.meta.context_usage = meta.title, meta.context_usage
        history.save_conversation(fork)
        self.services.long_sessions.fork_checkpoints(sid, fork.id)
        return fork.id

    def _fork(self, session_id: str) -> Session:
        return self.resume(self.fork_stored(session_id))[0]

    # --- the process ------------------------------------------------------------------

    def mcp_statuses(self, wait: float = 0.0, cwd: Path | None = None) -> list[McpServerStatus]:
        """Status of the configured MCP servers (plus ``cwd``'s project file), waiting up to ``wait`` seconds."""
        root = self.services.sandbox_for(cwd)[0] if cwd is not None else None
        return self.services.mcp.statuses(None, wait, root)

    def close(self, wait: float = 2.0, wait_for_servers: bool = True) -> None:
        """Cancel every running turn and wait for them briefly, then stop every MCP server (their
        processes end; without ``wait_for_servers`` they are only told to, for a process about to exit),
        forget the live sessions and close the memory database."""
        sessions = self.sessions.all()
        for session in sessions:
            session.cancel()
        deadline = time.monotonic() + wait
        for session in sessions:
            if session.live.turn is not None:
                session.live.turn.join(max(0.0, deadline - time.monotonic()))
        self.sessions.release_all()
        self.services.mcp.close(wait=wait_for_servers)
        if self.services.long_term_memory is not None:
            self.services.long_term_memory.close()
