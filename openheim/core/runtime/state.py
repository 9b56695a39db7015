"""AgentState: the request handlers every front end calls (new, load, list, prompt, cancel, ...)."""
from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from openheim.config.resolve import all_models, resolve_choice
from openheim.core.models import AgentResult, ContentBlock, Message, StreamEvent
from openheim.core.permission import AllowAll
from openheim.core.runtime.session import SessionMap, SessionState
from openheim.core.turn import CancelToken, TurnContext
from openheim.errors import InvalidArgument, NotFound, OpenheimError, SessionBusy

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.config.schema import Config
    from openheim.core.client_io import ClientIo
    from openheim.core.llm.base import LlmClient
    from openheim.core.permission import PermissionGate
    from openheim.memory.history import Conversation
    from openheim.tools.registry import ToolRegistry

log = logging.getLogger(__name__)

OnEvent = Callable[[StreamEvent], None]


@dataclass
class LoadedSession:
    session: SessionState
    messages: list[Message]
    warning: str | None = None


@dataclass
class RuntimeSettings:
    """What the builder resolved once for the whole runtime."""

    config: Config
    data_dir: Path
    work_dir: Path | None = None  # configured sandbox root (canonical), or None: each session's cwd
    overrides: dict = field(default_factory=dict)  # applied to every resolved AgentConfig
    secret_env_vars: frozenset[str] = frozenset()
    default_provider: str | None = None  # the model new sessions get when they name none
    default_model: str | None = None


def check_session_id(session_id: str) -> str:
    try:
        return str(uuid.UUID(session_id))
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgument("invalid session id format") from None


class AgentState:
    """Shared runtime: config, LLM clients, tools, memory and the live sessions."""

    def __init__(self, settings: RuntimeSettings, registry: ToolRegistry,
                 llm_factory: Callable[[AgentConfig], LlmClient] | None = None) -> None:
        from openheim.memory.context import MemoryContext

        self.settings = settings
        self.config = settings.config
        self.registry = registry
        self.memory = MemoryContext(settings.data_dir)
        self.sessions = SessionMap()
        self._llm_factory = llm_factory
        self._clients: dict[tuple[str, str], LlmClient] = {}
        self._clients_lock = threading.Lock()

    # --- configuration -----------------------------------------------------

    def resolve_model(self, provider: str | None = None, model: str | None = None) -> AgentConfig:
        cfg = resolve_choice(self.config, provider, model)
        return cfg.with_(**self.settings.overrides) if self.settings.overrides else cfg

    def models(self) -> list[tuple[str, str]]:
        return all_models(self.config)

    def llm_for(self, cfg: AgentConfig) -> LlmClient:
        """One client per (provider, model), reused across sessions."""
        key = (cfg.provider_name, cfg.model)
        with self._clients_lock:
            client = self._clients.get(key)
            if client is None:
                if self._llm_factory is not None:
                    client = self._llm_factory(cfg)
                else:
                    from openheim.core.llm.factory import create_client

                    client = create_client(cfg)
                self._clients[key] = client
            return client

    def sandbox_for(self, cwd: Path) -> tuple[Path, Path]:
        """(sandbox root, session cwd): the configured work_dir bounds every session."""
        if not cwd.is_absolute():
            raise InvalidArgument(f"cwd must be an absolute path, got '{cwd}'")
        work_dir = self.settings.work_dir
        if work_dir is None:
            return cwd, cwd
        try:
            cwd.resolve().relative_to(work_dir)
        except ValueError:
            raise InvalidArgument(f"cwd '{cwd}' is outside the configured work_dir '{work_dir}'") from None
        return work_dir, cwd

    # --- sessions --------------------------------------------------------------

    def new_session(self, cwd: Path, model: str | None = None, provider: str | None = None,
                    skills: list[str] | tuple[str, ...] = ()) -> SessionState:
        self.sandbox_for(cwd)
        merged = list(dict.fromkeys([*self.config.default_skills, *skills]))
        if provider is None and model is None:
            provider, model = self.settings.default_provider, self.settings.default_model
        session = SessionState(str(uuid.uuid4()), self.resolve_model(provider, model), cwd, merged)
        return self.sessions.insert(session)

    def session(self, session_id: str) -> SessionState:
        sid = check_session_id(session_id)
        session = self.sessions.get(sid)
        if session is None:
            raise NotFound(f"session not found: {sid}")
        return session

    def load_session(self, session_id: str, cwd: Path | None = None) -> LoadedSession:
        """Attach to a stored conversation (a live session keeps its state)."""
        sid = check_session_id(session_id)
        conv = self.memory.history.load(sid)
        live = self.sessions.get(sid)
        if live is not None:
            if live.in_flight:
                raise SessionBusy(sid)
            return LoadedSession(live, conv.messages)
        meta = conv.meta
        session_cwd = cwd or (Path(meta.cwd) if meta.cwd else Path.cwd())
        self.sandbox_for(session_cwd)
        cfg, warning = self._restore_model(meta.provider, meta.model)
        session = SessionState(sid, cfg, session_cwd, list(meta.skills), meta.mode)
        return LoadedSession(self.sessions.insert(session), conv.messages, warning)

    def _restore_model(self, provider: str | None, model: str | None) -> tuple[AgentConfig, str | None]:
        try:
            if provider and model:
                return self.resolve_model(provider, model), None
            if provider:
                return self.resolve_model(provider, None), None
            return self.resolve_model(None, model), None
        except OpenheimError as e:
            default = self.config.default_provider
            warning = (f"[warning] Could not restore this session's provider '{provider}' ({e}). "
                       f"Falling back to the default provider '{default}'.")
            return self.resolve_model(None, None), warning

    def list_sessions(self, cwd: str | None = None) -> list:
        metas = self.memory.history.list()
        return [m for m in metas if cwd is None or m.cwd == cwd]

    def delete_session(self, session_id: str) -> None:
        sid = check_session_id(session_id)
        live = self.sessions.get(sid)
        if live is not None and live.in_flight:
            raise SessionBusy(sid)
        self.sessions.remove(sid)
        self.memory.history.delete(sid)

    def close_session(self, session_id: str) -> None:
        session = self.sessions.remove(check_session_id(session_id))
        if session is not None:
            session.cancel.cancel()

    def cancel(self, session_id: str) -> None:
        try:
            session = self.sessions.get(check_session_id(session_id))
        except InvalidArgument:
            return
        if session is not None:
            session.cancel.cancel()

    def set_model(self, session_id: str, provider: str | None, model: str | None) -> AgentConfig:
        session = self.session(session_id)
        session.config = self.resolve_model(provider, model)
        session.fitter = None  # a new model has its own window and token ratio
        self._persist_session_fields(session)
        return session.config

    def set_mode(self, session_id: str, mode: str) -> str:
        from openheim.core.mode import AgentMode

        session = self.session(session_id)
        session.mode = AgentMode.parse(mode).value
        self._persist_session_fields(session)
        return session.mode

    def _persist_session_fields(self, session: SessionState) -> None:
        """Model and mode switches survive a reload (when the conversation exists)."""
        history = self.memory.history
        if session.in_flight or not history.exists(session.id):
            return
        conv = history.load(session.id)
        conv.meta.model, conv.meta.provider = session.config.model, session.config.provider_name
        conv.meta.mode = session.mode
        history.save_meta(conv)

    # --- the turn -----------------------------------------------------------------

    def prompt(self, session_id: str, blocks: list[ContentBlock], gate: PermissionGate | None = None,
               client_io: ClientIo | None = None, on_event: OnEvent | None = None,
               extra_skills: list[str] | tuple[str, ...] = (), cancel: CancelToken | None = None) -> AgentResult:
        """Run one turn: prompt lock, lease, prepare, loop, persist. Blocks the calling thread.

        ``cancel`` lets a front end hold the turn's token before the turn starts, so no cancel is lost.
        """
        session = self.session(session_id)
        if not session.prompt_lock.acquire(blocking=False):
            raise SessionBusy(session.id)
        try:
            session.cancel = cancel or CancelToken()
            return self._run_locked(session, blocks, gate, client_io, on_event or (lambda e: None), extra_skills)
        finally:
            session.touch()
            session.prompt_lock.release()

    def _run_locked(self, session: SessionState, blocks: list[ContentBlock], gate: PermissionGate | None,
                    client_io: ClientIo | None, on_event: OnEvent, extra_skills) -> AgentResult:
        from openheim.core.agent import run_turn
        from openheim.core.context import ContextFitter
        from openheim.core.mode import tools_for_mode
        from openheim.core.permission import RememberingGate
        from openheim.memory.lease import Lease

        history = self.memory.history
        llm = self.llm_for(session.config)
        root, cwd = self.sandbox_for(session.cwd)
        ctx = TurnContext(cancel=session.cancel, work_dir=root, cwd=cwd,
                          gate=RememberingGate(gate or AllowAll(), session.approvals, self.registry.capabilities), client_io=client_io,
                          session_id=session.id, secret_env_vars=self.settings.secret_env_vars)
        with Lease.acquire(history.history_dir, session.id):
            conv = self._conversation_for(session)
            system = self.memory.prepare(conv, root, cwd, extra_skills=list(extra_skills)).build()
            recorder = _Recorder(history, conv, on_event)
            recorder.record(Message("user", list(blocks)))
            try:
                if session.fitter is None:
                    session.fitter = ContextFitter(session.config.context_window)
                result = run_turn(llm, tools_for_mode(self.registry, session.mode), session.config,
                                  conv.messages, ctx, recorder, system, session.fitter)
                if result.context_usage is not None:
                    conv.meta.context_usage = result.context_usage
            finally:
                recorder.close()
            return result

    def _conversation_for(self, session: SessionState) -> Conversation:
        history = self.memory.history
        cfg = session.config
        cached = session.conversation
        if cached is not None and history.is_current(cached):
            conv = cached  # no re-read of a long log every turn
        elif history.exists(session.id):
            conv = history.load(session.id)
        else:
            conv = history.create(id=session.id, model=cfg.model, provider=cfg.provider_name,
                                  skills=session.skills, cwd=str(session.cwd))
        conv.meta.cwd = str(session.cwd)
        conv.meta.model, conv.meta.provider = cfg.model, cfg.provider_name
        conv.meta.mode = session.mode
        session.conversation = conv
        return conv


class _Recorder:
    """Appends each finished message to the log as it happens; falls back to a full save on failure."""

    def __init__(self, history, conv: Conversation, on_event: OnEvent) -> None:
        self.history, self.conv, self.on_event = history, conv, on_event
        self.failed = False

    def record(self, message: Message) -> None:
        """The user's message: appended to memory and disk before the loop starts."""
        self.conv.messages.append(message)
        self._write(message)

    def __call__(self, event: StreamEvent) -> None:
        if event.kind == "message_appended":
            self._write(event.message)
        self.on_event(event)

    def _write(self, message: Message) -> None:
        if self.failed:
            return
        try:
            self.history.append_message(self.conv, message)
        except (OSError, OpenheimError) as e:
            log.warning("could not append to the history of %s (%s); it will be rewritten at the end",
                        self.conv.meta.id, e)
            self.failed = True

    def close(self) -> None:
        try:
            if self.failed:
                self.history.save_conversation(self.conv)
                self.failed = False
            else:
                self.history.save_meta(self.conv)
        except OSError as e:
            raise OpenheimError(f"could not save conversation {self.conv.meta.id}: {e}") from None
