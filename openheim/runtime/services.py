"""Services: what every live session of one runtime shares (settings, the LLM client cache, the sandbox,
model resolution, subagent profiles, tools, MCP wiring, the conversation store, checkpoints)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.config.project_settings import load_project_rules
from openheim.config.resolve import all_models, resolve_choice
from openheim.config.rules import unmatched_rules
from openheim.conversation.store import ConversationStore
from openheim.core.final_decision import ProtectedWritesGate
from openheim.core.permission import RulesGate
from openheim.core.tools import LayeredExecutor, ToolRegistry
from openheim.runtime.long_sessions import LongSessions
from openheim.runtime.mcp_wiring import McpWiring
from openheim.tools.delegate import DelegateTool, Delegation
from openheim.tools.sandbox import sandbox_root

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.config.rules import RuleSet
    from openheim.config.schema import Config
    from openheim.conversation.history import Conversation
    from openheim.core.llm.adapters import BlockingLlm
    from openheim.core.llm.base import LlmClient
    from openheim.core.permission import PermissionGate
    from openheim.core.tools import ToolExecutor
    from openheim.mcp.project import KeyPolicy
    from openheim.memory.long_term import LongTermMemory
    from openheim.runtime.live import SessionState

log = logging.getLogger(__name__)


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


class Services:
    """The one object every session of a runtime shares."""

    def __init__(
        self,
        settings: RuntimeSettings,
        registry: ToolRegistry,
        llm_factory: Callable[[AgentConfig], LlmClient | BlockingLlm] | None = None,
        long_term_memory: LongTermMemory | None = None,
    ) -> None:
        self.settings = settings
        self.config = settings.config
        self.registry = registry
        self.long_term_memory = long_term_memory
        self.mcp = McpWiring(
            registry,
            settings.data_dir,
            settings.config.mcp_startup_timeout_secs,
            settings.config.mcp_max_message_mib << 20,
            lambda: key_policy(settings.config),
        )
        self.conversations = ConversationStore(settings.data_dir)
        self.long_sessions = LongSessions(self.config, settings.data_dir, self.conversations.history)
        self.profiles = ProfileCache(settings.data_dir / "agents")
        self._llm_factory = llm_factory
        self._clients: dict[tuple[str, str], LlmClient] = {}
        self._clients_lock = threading.Lock()
        self._warned_rules: set[str] = set()  # permission rules already reported as matching no tool

    # --- models -------------------------------------------------------------------------

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
                client = self._new_client(cfg)
                self._clients[key] = client
            return client

    def _new_client(self, cfg: AgentConfig) -> LlmClient:
        # the provider wires load with the first client: a start-up seam (`--version` never needs them)
        if self._llm_factory is not None:
            from openheim.core.llm.adapters import as_llm_client

            return as_llm_client(self._llm_factory(cfg))
        from openheim.core.llm.factory import create_client

        return create_client(cfg)

    # --- the sandbox and permission rules -------------------------------------------------------

    def sandbox_for(self, cwd: Path) -> tuple[Path, Path]:
        """(sandbox root, session cwd): the configured work_dir bounds every session."""
        return sandbox_root(self.settings.work_dir, cwd), cwd

    def permission_rules(self, cwd: Path) -> tuple[RuleSet, RuleSet, Path]:
        """(the user's rules, the project's rules for a session in ``cwd``, the sandbox root)."""
        root, cwd = self.sandbox_for(cwd)
        return self.config.permissions, load_project_rules(root, cwd, self.settings.data_dir), root

    def rules_gate(
        self,
        inner: PermissionGate,
        fallback: PermissionGate | None,
        root: Path,
        cwd: Path,
        tools: ToolExecutor,
    ) -> PermissionGate:
        """``inner`` behind the permission rules, when there are any, and the guard on writes to the
        project's own configuration (config.protected); a bad project file fails the turn here. A rule
        that matches no offered tool gets a warning line (once)."""
        user = self.config.permissions
        project = load_project_rules(root, cwd, self.settings.data_dir)  # root, cwd: already resolved
        if user or project:
            self._warn_unmatched(user + project, tools.names())
            project_allows = getattr(fallback, "project_allows_apply", True)
            inner = RulesGate(inner, user, project, str(root), str(cwd), tools.capabilities, project_allows)
        return ProtectedWritesGate(inner, fallback, user, project, str(root), str(cwd))

    def _warn_unmatched(self, rules: RuleSet, offered: list[str]) -> None:
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

    # --- tools --------------------------------------------------------------------------

    def runtime_tools(self) -> ToolExecutor:
        """The runtime's tool set: the registry plus the configured MCP servers that are ready."""
        return self.mcp.shared_tools() or self.registry

    def turn_tools(self, live: SessionState, base: ToolExecutor | None = None) -> ToolExecutor:
        """The session's tools (``base``, default: its tool set) plus delegate_task bound to its live model;
        the subagents it starts get ``base``: everything but delegate_task."""
        if base is None:
            base = live.tools if live.tools is not None else self.registry
        delegation = Delegation(
            self.profiles.get(),
            live.config,
            self.resolve_model,
            self.llm_for,
            base,
            self.config.max_parallel_subagents,
            frozenset(self.models()),
        )
        return LayeredExecutor(base, ToolRegistry([DelegateTool(delegation)]))

    # --- the conversation -------------------------------------------------------------------

    def conversation_for(self, live: SessionState) -> Conversation:
        """The session's conversation (the cached one while disk agrees), its meta brought up to date."""
        history = self.conversations.history
        cfg = live.config
        cached = live.conversation
        if cached is not None and history.is_current(cached):
            conv = cached  # no re-read of a long log every turn
        elif history.exists(live.id):
            conv = history.load(live.id)
        else:
            conv = history.create(
                id=live.id, model=cfg.model, provider=cfg.provider_name, skills=live.skills, cwd=str(live.cwd)
            )
        conv.meta.cwd = str(live.cwd)
        conv.meta.model, conv.meta.provider = cfg.model, cfg.provider_name
        conv.meta.mode = live.mode
        live.conversation = conv
        return conv


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
                self._profiles = [] if stamp is None else _load_profiles(self.dir)
                self._stamp = stamp
            return self._profiles


def _load_profiles(agents_dir: Path) -> list:
    from openheim.subagents.profiles import load_profiles  # only when an agents directory exists

    return load_profiles(agents_dir)


def key_policy(config: Config) -> KeyPolicy:
    """Provider key variables a project's MCP servers may not read without the user's leave."""
    from openheim.mcp.project import KeyPolicy  # openheim.mcp loads only once some MCP server exists

    key_vars = frozenset(p.env_var for p in config.providers.values() if p.env_var)
    return KeyPolicy(key_vars, dict(config.mcp_project_key_vars))
