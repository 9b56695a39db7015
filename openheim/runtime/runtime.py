"""Runtime: the request handlers every front end calls (new, load, list, prompt, cancel, ...)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.config.resolve import all_models, resolve_choice
from openheim.conversation.history import check_session_id
from openheim.core.events import MessageAppended, Notice, StreamEvent
from openheim.core.models import AgentResult, ContentBlock, Message
from openheim.core.permission import AllowAll
from openheim.core.turn_context import CancelToken, TurnContext
from openheim.errors import (
    ConfigError,
    InvalidArgument,
    NotFound,
    OpenheimError,
    ParseError,
    SessionBusy,
    TooManySessions,
)
from openheim.runtime.mcp_wiring import McpWiring
from openheim.runtime.recorder import TurnRecorder
from openheim.runtime.session import SessionMap, SessionState
from openheim.runtime.turn import Turn

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.config.rules import RuleSet
    from openheim.config.schema import Config, McpServerConfig
    from openheim.conversation.compaction import CompactionOutcome
    from openheim.conversation.history import Conversation
    from openheim.core.client_io import ClientIo
    from openheim.core.llm.adapters import BlockingLlm
    from openheim.core.llm.base import LlmClient
    from openheim.core.permission import PermissionGate
    from openheim.core.structured import OutputSchema
    from openheim.core.tools import (
        ToolCapabilities,
        ToolExecutor,
        ToolRegistry,
        ToolView,
    )
    from openheim.mcp.project import KeyPolicy
    from openheim.mcp.prompts import McpPrompt
    from openheim.mcp.status import McpServerStatus
    from openheim.memory.long_term import LongTermMemory
    from openheim.runtime.long_sessions import LongSessions

log = logging.getLogger(__name__)

OnEvent = Callable[[StreamEvent], None]


@dataclass(eq=False)
class ResumedSession:
    """The runtime side of resuming: the live session state, its stored messages and any warning."""

    session: SessionState
    messages: list[Message]
    warning: str | None = None


@dataclass(eq=False)
class RuntimeSettings:
    """What the builder resolved once for the whole runtime."""

    config: Config
    data_dir: Path
    work_dir: Path | None = None  # configured sandbox root (canonical), or None: each session's cwd
    overrides: dict = field(default_factory=dict)  # applied to every resolved AgentConfig
    secret_env_vars: frozenset[str] = frozenset()
    default_provider: str | None = None  # the model new sessions get when they name none
    default_model: str | None = None


class Runtime:
    """Shared runtime: config, LLM clients, tools, memory and the live sessions."""

    def __init__(
        self,
        settings: RuntimeSettings,
        registry: ToolRegistry,
        llm_factory: Callable[[AgentConfig], LlmClient | BlockingLlm] | None = None,
        long_term_memory: LongTermMemory | None = None,
    ) -> None:
        from openheim.conversation.store import ConversationStore

        self.settings = settings
        self.config = settings.config
        self.registry = registry
        self.long_term_memory = long_term_memory
        self._warned_rules: set[str] = set()  # permission rules already reported as matching no tool
        self.mcp = McpWiring(
            registry,
            settings.data_dir,
            settings.config.mcp_startup_timeout_secs,
            settings.config.mcp_max_message_mib << 20,
            lambda: _key_policy(settings.config),
        )
        self.conversations = ConversationStore(settings.data_dir)
        self.profiles = ProfileCache(settings.data_dir / "agents")
        self.sessions = SessionMap()
        self._llm_factory = llm_factory
        self._clients: dict[tuple[str, str], LlmClient] = {}
        self._clients_lock = threading.Lock()
        self._long_sessions: LongSessions | None = None

    @property
    def long_sessions(self) -> LongSessions:
        """Compaction, checkpoints, undo and fork (made on first use)."""
        if self._long_sessions is None:
            from openheim.runtime.long_sessions import LongSessions

            self._long_sessions = LongSessions(self.config, self.settings.data_dir, self.conversations.history)
        return self._long_sessions

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
                    from openheim.core.llm.adapters import as_llm_client

                    client = as_llm_client(self._llm_factory(cfg))
                else:
                    from openheim.core.llm.factory import create_client

                    client = create_client(cfg)
                self._clients[key] = client
            return client

    def sandbox_for(self, cwd: Path) -> tuple[Path, Path]:
        """(sandbox root, session cwd): the configured work_dir bounds every session."""
        from openheim.tools.sandbox import sandbox_root

        return sandbox_root(self.settings.work_dir, cwd), cwd

    # --- sessions --------------------------------------------------------------

    def new_session(
        self,
        cwd: Path,
        model: str | None = None,
        provider: str | None = None,
        skills: list[str] | tuple[str, ...] = (),
        mcp_servers: list[McpServerConfig] | None = None,
        hold: bool = False,
    ) -> SessionState:
        """A new live session; ``hold``: a connected client shows it, so it is not evicted until let go."""
        self.sandbox_for(cwd)
        if not self.sessions.has_room():  # before any MCP server of the session starts
            raise TooManySessions(self.sessions.capacity)
        merged = list(dict.fromkeys([*self.config.default_skills, *skills]))
        if provider is None and model is None:
            provider, model = self.settings.default_provider, self.settings.default_model
        session = SessionState(str(uuid.uuid4()), self.resolve_model(provider, model), cwd, merged)
        self._attach_tools(session, mcp_servers or [])
        return self._insert(session, hold)

    def _insert(self, session: SessionState, hold: bool) -> SessionState:
        try:
            inserted = self.sessions.insert(session, hold)
        except TooManySessions:
            session.release()
            raise
        if inserted is not session:  # another thread made it live meanwhile: its state wins
            session.release()
        return inserted

    def session(self, session_id: str) -> SessionState:
        sid = check_session_id(session_id)
        session = self.sessions.get(sid)
        if session is None:
            raise NotFound(f"session not found: {sid}")
        return session

    def load_session(
        self,
        session_id: str,
        cwd: Path | None = None,
        mcp_servers: list[McpServerConfig] | None = None,
        hold: bool = False,
    ) -> ResumedSession:
        """Attach to a stored conversation (a live session keeps its state; ``mcp_servers``, when given
        and different, replace its own servers); ``hold`` as for new_session."""
        sid = self.conversations.history.resolve_id(session_id)
        conv = self.conversations.history.load(sid)
        live = self.sessions.get(sid)
        if live is not None:
            if live.in_flight:
                raise SessionBusy(sid)
            if mcp_servers is not None and list(mcp_servers) != live.mcp_servers:
                self._attach_tools(live, mcp_servers)
            return ResumedSession(self._insert(live, hold), conv.messages)
        meta = conv.meta
        session_cwd = cwd or (Path(meta.cwd) if meta.cwd else Path.cwd())
        self.sandbox_for(session_cwd)
        mode = self._stored_mode(sid, meta.mode)
        cfg, warning = self._restore_model(meta.provider, meta.model)
        session = SessionState(sid, cfg, session_cwd, list(meta.skills), mode)
        if not self.sessions.has_room():
            raise TooManySessions(self.sessions.capacity)
        self._attach_tools(session, mcp_servers or [])
        return ResumedSession(self._insert(session, hold), conv.messages, warning)

    # --- tools and MCP servers ---------------------------------------------------------------

    def base_tools(self, session: SessionState) -> ToolExecutor:
        """The session's tool set: built-ins and custom tools, plus the MCP servers it sees."""
        return session.tools if session.tools is not None else self.registry

    def runtime_tools(self) -> ToolExecutor:
        """The runtime's tool set: the registry plus the configured MCP servers that are ready."""
        return self.mcp.shared_tools() or self.registry

    def _attach_tools(self, session: SessionState, servers: list[McpServerConfig]) -> None:
        self.mcp.attach(session, self.sandbox_for(session.cwd)[0], servers)

    def mcp_statuses(
        self, session: SessionState | None = None, wait: float = 0.0, cwd: Path | None = None
    ) -> list[McpServerStatus]:
        """Status of the MCP servers a session sees (or the runtime's, plus ``cwd``'s project file),
        waiting up to ``wait`` seconds for servers that are still starting."""
        return self.mcp.statuses(session, wait, self.sandbox_for(cwd)[0] if cwd is not None else None)

    def mcp_prompts(self, session: SessionState, wait: float = 0.0) -> list[McpPrompt]:
        """The prompts of the MCP servers a session sees, waiting up to ``wait`` seconds for those starting."""
        return self.mcp.prompts(session, wait)

    def expand_mcp_prompt(self, session: SessionState, name: str, arguments: str) -> str:
        """MCP prompt ``name`` with ``arguments`` (``key=value ...``) as the text of a user message."""
        return self.mcp.expand_prompt(session, name, arguments)

    def _stored_mode(self, session_id: str, mode: str) -> str:
        from openheim.core.mode import AgentMode

        try:
            return AgentMode.parse(mode).value
        except InvalidArgument:
            path = self.conversations.history.meta_path(session_id)
            raise ParseError(
                f'conversation metadata {path} has an unknown mode {mode!r}; set "mode" to one '
                f"of {', '.join(m.value for m in AgentMode)} in that file"
            ) from None

    def _restore_model(self, provider: str | None, model: str | None) -> tuple[AgentConfig, str | None]:
        try:
            if provider and model:
                return self.resolve_model(provider, model), None
            if provider:
                return self.resolve_model(provider, None), None
            return self.resolve_model(None, model), None
        except OpenheimError as e:
            default = self.config.default_provider
            warning = (
                f"[warning] Could not restore this session's provider '{provider}' ({e}). "
                f"Falling back to the default provider '{default}'."
            )
            return self.resolve_model(None, None), warning

    def list_sessions(self, cwd: str | None = None, include_failed: bool = False) -> list:
        """Stored sessions, newest first; those whose turn failed before any reply only with ``include_failed``."""
        metas = self.conversations.history.list(include_failed=include_failed)
        return [m for m in metas if cwd is None or m.cwd == cwd]

    def delete_session(self, session_id: str) -> None:
        sid = self.conversations.history.resolve_id(session_id)
        live = self.sessions.get(sid)
        if live is not None and live.in_flight:
            raise SessionBusy(sid)
        self.sessions.remove(sid)
        self.conversations.history.delete(sid)

    def close_session(self, session_id: str) -> None:
        session = self.sessions.remove(check_session_id(session_id))
        if session is not None:
            session.stop()

    def cancel(self, session_id: str) -> None:
        try:
            session = self.sessions.get(check_session_id(session_id))
        except InvalidArgument:
            return
        if session is not None:
            session.stop()

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
        history = self.conversations.history
        if session.in_flight or not history.exists(session.id):
            return
        conv = history.load(session.id)
        conv.meta.model, conv.meta.provider = session.config.model, session.config.provider_name
        conv.meta.mode = session.mode
        history.save_meta(conv)

    def close(self, wait: float = 2.0, wait_for_servers: bool = True) -> None:
        """Cancel every running turn and wait for them briefly, then stop every MCP server (their
        processes end; without ``wait_for_servers`` they are only told to, for a process about to exit),
        forget the live sessions and close the memory database."""
        import time

        sessions = self.sessions.all()
        for session in sessions:
            session.stop()
        deadline = time.monotonic() + wait
        for session in sessions:
            if session.turn is not None:
                session.turn.join(max(0.0, deadline - time.monotonic()))
        self.sessions.release_all()
        self.mcp.close(wait=wait_for_servers)
        if self.long_term_memory is not None:
            self.long_term_memory.close()

    # --- the turn -----------------------------------------------------------------

    def start_turn(
        self,
        session_id: str,
        blocks: list[ContentBlock],
        gate: PermissionGate | None = None,
        client_io: ClientIo | None = None,
        extra_skills: list[str] | tuple[str, ...] = (),
        output: OutputSchema | None = None,
    ) -> Turn:
        """Start a turn on its own worker thread: SessionBusy while another runs, unless that one was
        cancelled, in which case the new turn first waits for it to let go."""
        from openheim.core.tools import ViewContext

        session = self.session(session_id)
        with session.turn_lock:
            previous = session.turn
            if previous is not None and previous.running:
                if not previous.cancelled:
                    raise SessionBusy(session.id)
            elif session.in_flight:
                raise SessionBusy(session.id)
            else:
                previous = None

            def body(on_event: OnEvent, cancel: CancelToken, sync: Callable[[], None]) -> AgentResult:
                try:
                    return self._run_turn(
                        session, blocks, gate, client_io, on_event, extra_skills, cancel, sync, output
                    )
                finally:
                    session.touch()

            def present(tool_name: str, args: dict | None) -> ToolView:
                where = ViewContext(session.cwd, client_io, turn.token, root=self.sandbox_for(session.cwd)[0])
                return self.turn_tools(session).present(tool_name, args, where)

            turn = Turn(session.id, body, present, after=previous, timeout=session.config.turn_timeout_secs)
            session.turn = turn
        return turn.start()

    def _run_turn(
        self,
        session: SessionState,
        blocks: list[ContentBlock],
        gate: PermissionGate | None,
        client_io: ClientIo | None,
        on_event: OnEvent,
        extra_skills: list[str] | tuple[str, ...],
        cancel: CancelToken,
        sync: Callable[[], None] | None = None,
        output: OutputSchema | None = None,
    ) -> AgentResult:
        """One turn on the Turn's worker thread: lease, prepare, loop, persist (the Turn owns busy and cancel)."""
        from openheim.conversation.lease import Lease
        from openheim.core.agent import run_turn
        from openheim.core.asking import AskTheFrontEnd
        from openheim.core.context import ContextFitter
        from openheim.core.mode import tools_for_mode
        from openheim.core.permission import RememberingGate
        from openheim.core.spend import Spend
        from openheim.runtime.hooks import after_turn, before_prompt, turn_hooks

        # Everything that can fail before the model is asked comes before the prompt is stored, so a turn
        # that cannot start leaves no unanswered prompt behind.
        history = self.conversations.history
        llm = self.llm_for(session.config)
        root, cwd = self.sandbox_for(session.cwd)
        # MCP servers have been starting in the background; wait (bounded, cancellable) for the never-seen
        # ones, saying so through the turn's events (each front end shows a Notice its own way)
        base = (
            session.tools.for_turn(cancel, lambda line, level: on_event(Notice(line, level)))
            if session.tools is not None
            else self.registry
        )
        checkpoint = self.long_sessions.checkpoint(session.id, root)
        if checkpoint is not None:  # taken before the first tool that may change files runs
            base = checkpoint.wrap(base)
        every_tool = self.turn_tools(session, base)
        tools = tools_for_mode(every_tool, session.mode)
        if isinstance(gate, AskTheFrontEnd):  # questions go out as events of this turn
            gate = gate.for_turn(on_event)
        remembering = RememberingGate(gate or AllowAll(), session.approvals, every_tool.capabilities)
        _check_cost_budget(session.config)
        hooks = turn_hooks(self.config, self.settings.data_dir, session.id, root, cwd, self.settings.secret_env_vars)
        ctx = TurnContext(
            cancel=cancel,
            work_dir=root,
            cwd=cwd,
            gate=self._gate(remembering, gate, root, cwd, every_tool.capabilities, every_tool.names()),
            client_io=client_io,
            session_id=session.id,
            secret_env_vars=self.settings.secret_env_vars,
            emit=on_event,
            sync=sync,
            spend=Spend(session.spent),
            hooks=hooks,
        )
        if session.fitter is None:
            session.fitter = ContextFitter(session.config.context_window)
        with Lease.acquire(history.history_dir, session.id):
            if hooks is not None:
                blocks = before_prompt(hooks, list(blocks), not session.hooked, history.exists(session.id), cancel)
                session.hooked = True
            conv = self._conversation_for(session)
            if conv.meta.cost and not session.spent:  # a resumed session's running total
                session.spent = conv.meta.cost
            ctx.spend.before = session.spent
            system = self.conversations.prepare(conv, root, cwd, extra_skills=list(extra_skills)).build()
            compactor = self.long_sessions.compactor(session.config, conv, self.resolve_model, self.llm_for)
            recorder = TurnRecorder(history, conv, on_event)
            if checkpoint is not None:
                checkpoint.at = len(conv.messages)
            recorder.record(Message("user", list(blocks)))
            try:
                result = run_turn(
                    llm, tools, session.config, conv.messages, ctx, recorder, system, session.fitter, output, compactor
                )
                if hooks is not None and hooks.has("stop"):

                    def go_on(message: Message) -> None:
                        recorder.record(message)
                        on_event(MessageAppended(message))

                    result = after_turn(
                        hooks,
                        result,
                        go_on,
                        lambda: run_turn(
                            llm,
                            tools,
                            session.config,
                            conv.messages,
                            ctx,
                            recorder,
                            system,
                            session.fitter,
                            output,
                            compactor,
                        ),
                    )
                result.usage = ctx.usage.total  # the turn's own calls (and summary calls) and its subagents'
                if result.context_usage is not None:
                    conv.meta.context_usage = result.context_usage
                conv.meta.failed = False
            except BaseException:
                # a session that never got a reply (server down, a bad key) stays out of the lists
                conv.meta.failed = not any(m.role == "assistant" for m in conv.messages)
                raise
            finally:
                session.spent = ctx.spend.total
                if ctx.spend.turn:
                    conv.meta.cost = session.spent
                recorder.close()
                if checkpoint is not None:
                    checkpoint.finish()
        return result

    def compact(self, session_id: str, on_event: OnEvent | None = None) -> CompactionOutcome:
        """Summarise the session's conversation now (``:compact``, ``/compact``, ``sessions compact``)."""
        from openheim.conversation.lease import Lease

        session = self.session(session_id)
        with session.turn_lock:
            if session.in_flight:
                raise SessionBusy(session.id)
        history = self.conversations.history
        with Lease.acquire(history.history_dir, session.id):  # a turn started meanwhile gets SessionLocked
            conv = self._conversation_for(session)
            if not conv.messages:
                raise InvalidArgument("nothing to compact: the session has no messages yet")
            compactor = self.long_sessions.compactor(session.config, conv, self.resolve_model, self.llm_for)
            recorder = TurnRecorder(history, conv, on_event or (lambda e: None))
            ratio = session.fitter.bytes_per_token if session.fitter is not None else 4.0
            try:
                return compactor.compact(conv.messages, ratio, CancelToken(), recorder, manual=True)
            finally:
                recorder.close()
                session.touch()

    def fork(self, session_id: str) -> str:
        """A new session starting where ``session_id`` is now: its messages and compactions copied, its
        checkpoints shared (undo in either session restores the same copies). The new session's id."""
        from openheim.conversation.lease import Lease

        sid = self.conversations.history.resolve_id(session_id)
        live = self.sessions.get(sid)
        if live is not None and live.in_flight:
            raise SessionBusy(sid)
        history = self.conversations.history
        with Lease.acquire(history.history_dir, sid):
            source = history.load(sid)
        meta = source.meta
        fork = history.create(
            model=meta.model, provider=meta.provider, skills=meta.skills, cwd=meta.cwd, mode=meta.mode
        )
        fork.messages, fork.compactions = list(source.messages), list(source.compactions)
        fork.meta.title, fork.meta.context_usage = meta.title, meta.context_usage
        history.save_conversation(fork)
        self.long_sessions.fork_checkpoints(sid, fork.id)
        return fork.id

    def permission_rules(self, cwd: Path) -> tuple[RuleSet, RuleSet, Path]:
        """(the user's rules, the project's rules for a session in ``cwd``, the sandbox root)."""
        from openheim.config.project_settings import load_project_rules

        root, cwd = self.sandbox_for(cwd)
        return self.config.permissions, load_project_rules(root, cwd, self.settings.data_dir), root

    def _gate(
        self,
        inner: PermissionGate,
        fallback: PermissionGate | None,
        root: Path,
        cwd: Path,
        capabilities: Callable[[str], ToolCapabilities],
        offered: list[str],
    ) -> PermissionGate:
        """``inner`` behind the permission rules, when there are any, and the guard on writes to the
        project's own configuration (config.protected); a bad project file fails the turn here. A rule
        that matches no offered tool gets a warning line (once)."""
        from openheim.config.project_settings import load_project_rules
        from openheim.core.final_decision import ProtectedWritesGate
        from openheim.core.permission import RulesGate

        user = self.config.permissions
        project = load_project_rules(root, cwd, self.settings.data_dir)  # root, cwd: already resolved
        if user or project:
            self._warn_unmatched(user + project, offered)
            project_allows = getattr(fallback, "project_allows_apply", True)
            inner = RulesGate(inner, user, project, str(root), str(cwd), capabilities, project_allows)
        return ProtectedWritesGate(inner, fallback, user, project, str(root), str(cwd))

    def _warn_unmatched(self, rules: RuleSet, offered: list[str]) -> None:
        from openheim.config.rules import unmatched_rules

        for rule in unmatched_rules(rules, offered):
            key = f"{rule.source}:{rule.text}"
            if key not in self._warned_rules:
                self._warned_rules.add(key)
                log.warning(
                    "permission rule '%s'%s matches no tool offered here (MCP tools: mcp__server__tool "
                    "or server__tool)",
                    rule.text,
                    f" from {rule.source}" if rule.source else "",
                )

    def turn_tools(self, session: SessionState, base: ToolExecutor | None = None) -> ToolExecutor:
        """The session's tools (``base``, default base_tools) plus delegate_task bound to its live model;
        the subagents it starts get ``base``: everything but delegate_task."""
        from openheim.core.tools import LayeredExecutor
        from openheim.core.tools import ToolRegistry as Registry
        from openheim.tools.delegate import DelegateTool, Delegation

        base = base if base is not None else self.base_tools(session)
        delegation = Delegation(
            self.profiles.get(),
            session.config,
            self.resolve_model,
            self.llm_for,
            base,
            self.config.max_parallel_subagents,
            frozenset(self.models()),
        )
        return LayeredExecutor(base, Registry([DelegateTool(delegation)]))

    def _conversation_for(self, session: SessionState) -> Conversation:
        history = self.conversations.history
        cfg = session.config
        cached = session.conversation
        if cached is not None and history.is_current(cached):
            conv = cached  # no re-read of a long log every turn
        elif history.exists(session.id):
            conv = history.load(session.id)
        else:
            conv = history.create(
                id=session.id, model=cfg.model, provider=cfg.provider_name, skills=session.skills, cwd=str(session.cwd)
            )
        conv.meta.cwd = str(session.cwd)
        conv.meta.model, conv.meta.provider = cfg.model, cfg.provider_name
        conv.meta.mode = session.mode
        session.conversation = conv
        return conv


def _check_cost_budget(cfg: AgentConfig) -> None:
    """A dollar budget needs the model's price: without one the turn does not start."""
    if cfg.max_cost is not None and cfg.price is None:
        raise ConfigError(
            f"a cost budget (--max-cost / [budgets] max_cost) needs the price of "
            f'{cfg.provider_name}/{cfg.model}: add [prices."{cfg.provider_name}/{cfg.model}"] with '
            "input and output (US dollars per million tokens) to config.toml"
        )


class ProfileCache:
    """Subagent profiles, read again only when the agents directory changes."""

    def __init__(self, agents_dir: Path) -> None:
        self.dir = agents_dir
        self._stamp: tuple | None = None
        self._profiles: list = []
        self._lock = threading.Lock()

    def get(self) -> list:
        try:
            st = self.dir.stat()
            stamp: tuple | None = (
                st.st_mtime_ns,
                st.st_ino,
                *sorted((p.name, p.stat().st_mtime_ns) for p in self.dir.glob("*.md")),
            )
        except OSError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                if stamp is None:
                    self._profiles = []
                else:
                    from openheim.subagents.profiles import load_profiles

                    self._profiles = load_profiles(self.dir)
                self._stamp = stamp
            return self._profiles


def _key_policy(config: Config) -> KeyPolicy:
    """Provider key variables a project's MCP servers may not read without the user's leave."""
    from openheim.mcp.project import KeyPolicy

    key_vars = frozenset(p.env_var for p in config.providers.values() if p.env_var)
    return KeyPolicy(key_vars, dict(config.mcp_project_key_vars))
