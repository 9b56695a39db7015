"""OpenheimClient: the one door to the runtime, used by every front end and by embedders.

The client is the process: its config, models and tools, and the sessions it opens, loads, lists, reads and
deletes. Each live conversation is a ``Session`` (openheim/runtime/session.py): a front end starts turns
with ``session.start_turn`` and renders the ``Turn``'s events in its own medium. Nothing outside this module
reaches the runtime's internals.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.config.edit import save_theme
from openheim.config.public_view import public_view
from openheim.config.rules import decide
from openheim.config.schema import McpServerConfig, parse_mcp_server
from openheim.core.function_tool import FunctionTool
from openheim.core.models import Message, Tool
from openheim.core.tools import check_handler
from openheim.errors import ConfigError

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.config.rules import Verdict
    from openheim.config.schema import Config
    from openheim.conversation.history import ConversationMeta
    from openheim.conversation.skills import Skill
    from openheim.core.llm.adapters import BlockingLlm
    from openheim.core.llm.base import LlmClient
    from openheim.core.tools import ToolCapabilities, ToolHandler
    from openheim.mcp.status import McpServerStatus
    from openheim.memory.long_term import LongTermMemory
    from openheim.runtime.runtime import Runtime
    from openheim.runtime.session import Session


def mcp_server_configs(servers: list | tuple | None) -> list[McpServerConfig]:
    """Server configs from McpServerConfig objects or dicts ``{"name", "command", "args", "env"}`` /
    ``{"name", "url", "headers"}`` (a ConfigError says what is wrong with one)."""
    configs: list[McpServerConfig] = []
    for i, entry in enumerate(servers or ()):
        if isinstance(entry, McpServerConfig):
            configs.append(entry)
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise ConfigError(f"MCP server #{i + 1} must be a McpServerConfig or a dict with a 'name'")
        table = {k: v for k, v in entry.items() if k != "name"}
        configs.append(parse_mcp_server(entry["name"], table, section=f"mcp_servers[{i}] ({entry['name']})"))
    return configs


@dataclass
class LoadedSession:
    """What resuming a stored session gives back besides the session: its messages and any warning."""

    messages: list[Message]
    warning: str | None = None  # e.g. its provider is gone and the default one was used


class OpenheimClient:
    """The process: config, models, tools, and the sessions it opens, loads, lists, reads and deletes.
    ``state`` (the Runtime) is internal: front ends never touch it."""

    def __init__(self, state: Runtime) -> None:
        self.state = state

    def close(self, wait_for_servers: bool = True) -> None:
        """Cancel running turns, wait for them briefly, and release threads, children and databases. A process
        about to exit passes ``wait_for_servers=False``: MCP servers are told to stop (they see their stdin
        close as the process ends; leftovers are killed a few seconds later) and it does not wait for them."""
        self.state.close(wait_for_servers=wait_for_servers)

    def __enter__(self) -> OpenheimClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def builder() -> OpenheimBuilder:
        return OpenheimBuilder()

    @classmethod
    def from_config(cls, path: str | Path) -> OpenheimClient:
        return cls.builder().config_path(path).build()

    @property
    def config(self) -> Config:
        return self.state.services.config

    @property
    def data_dir(self) -> Path:
        return self.state.services.settings.data_dir

    @property
    def work_dir(self) -> Path | None:
        """The configured sandbox root (canonical), or None: each session is rooted at its cwd."""
        return self.state.services.settings.work_dir

    def public_config(self, work_dir: str | Path | None = None) -> dict:
        """The config as clients may see it: no keys, no data_dir, scrubbed URLs (``work_dir`` if none is set)."""
        return public_view(self.config, str(self.work_dir or work_dir or Path.cwd()))

    # --- sessions ---------------------------------------------------------------------

    def new_session(
        self,
        cwd: str | Path | None = None,
        model: str | None = None,
        provider: str | None = None,
        skills: list[str] | tuple[str, ...] = (),
        mcp_servers: list[McpServerConfig | dict] | None = None,
        hold: bool = False,
    ) -> Session:
        """A new session rooted at ``cwd``. ``mcp_servers`` are its own (started now, in the background,
        and stopped when it closes), added to the configured ones. ``hold``: a connected client shows it,
        so it is never evicted to make room until ``session.let_go()``; when every live session is running
        or held and the map is full, TooManySessions."""
        configs = mcp_server_configs(mcp_servers)
        return self.state.new(Path(cwd or os.getcwd()).absolute(), model, provider, skills, configs, hold)

    def resume_session(
        self,
        session_id: str,
        cwd: str | Path | None = None,
        mcp_servers: list[McpServerConfig | dict] | None = None,
        hold: bool = False,
    ) -> tuple[Session, LoadedSession]:
        """Load a stored session (a live one keeps its state): the session, and its messages and any warning."""
        configs = mcp_server_configs(mcp_servers) if mcp_servers is not None else None
        session, messages, warning = self.state.resume(session_id, Path(cwd).absolute() if cwd else None, configs, hold)
        return session, LoadedSession(messages, warning)

    def session(self, session_id: str) -> Session:
        """A live session (NotFound if there is none with that id)."""
        return self.state.live(session_id)

    def list_sessions(self, cwd: str | None = None, include_failed: bool = False) -> list[ConversationMeta]:
        """Stored sessions, newest first (in ``cwd`` when given); sessions whose first turn failed before any
        reply are left out unless ``include_failed``."""
        return self.state.stored(cwd, include_failed)

    def stored_session(self, session_id: str) -> tuple[ConversationMeta, list[Message]]:
        """A stored conversation's metadata and messages (InvalidArgument for a malformed id, NotFound)."""
        history = self.state.services.conversations.history
        conv = history.load(history.resolve_id(session_id))
        return conv.meta, conv.messages

    def delete_session(self, session_id: str) -> None:
        """Forget a stored session (SessionBusy while a turn runs on it)."""
        self.state.discard(session_id)

    # --- what the runtime offers ---------------------------------------------------------------

    def models(self) -> list[tuple[str, str]]:
        """(provider, model) pairs the config offers."""
        return self.state.services.models()

    def tools(self) -> list[Tool]:
        """Built-in and custom tools, plus the tools of configured MCP servers that are ready."""
        return self.state.services.runtime_tools().definitions()

    def tool_capabilities(self, name: str) -> ToolCapabilities:
        return self.state.services.runtime_tools().capabilities(name)

    def explain_permission(self, tool_name: str, args: object, cwd: str | Path | None = None) -> Verdict:
        """What the permission rules (config, builder, and the project's for ``cwd``) say about a call."""
        where = Path(cwd or os.getcwd()).absolute()
        user, project, root = self.state.services.permission_rules(where)
        return decide(tool_name, args, user, project, str(root), str(where))

    def mcp_servers(self, wait: float = 0.0, cwd: str | Path | None = None) -> list[McpServerStatus]:
        """Status of the configured MCP servers (config.toml, builder, --mcp-config), waiting up to ``wait``
        seconds for those still starting. With ``cwd``, also that directory's project ``.mcp.json`` servers:
        started for the check when the file is trusted, listed as untrusted otherwise."""
        return self.state.mcp_statuses(wait, Path(cwd).absolute() if cwd else None)

    def memory(self) -> LongTermMemory | None:
        """The long-term memory behind the remember / search_memory / edit_memory / forget tools."""
        return self.state.services.long_term_memory

    def skills(self) -> list[Skill]:
        """The installed skills (name and description)."""
        return self.state.services.conversations.skills.list()

    def save_theme(self, name: str) -> None:
        """Save ``name`` as ``[tui].theme_color`` in the config file, keeping its comments and layout."""
        save_theme(self.config.path, name)
        self.config.theme_color = name


class OpenheimBuilder:
    """Collects options; ``build()`` loads config (file mode) or synthesises one (programmatic mode)."""

    def __init__(self) -> None:
        self._opts: dict = {}
        self._tools: list[ToolHandler] = []
        self._llm_factory: Callable[[AgentConfig], LlmClient | BlockingLlm] | None = None

    def _set(self, key: str, value: object) -> OpenheimBuilder:
        self._opts[key] = value
        return self

    def config_path(self, path: str | Path | None) -> OpenheimBuilder:
        return self._set("config_path", path)

    def provider(self, name: str | None) -> OpenheimBuilder:
        return self._set("provider", name)

    def model(self, name: str | None) -> OpenheimBuilder:
        return self._set("model", name)

    def api_key(self, key: str) -> OpenheimBuilder:
        return self._set("api_key", key)

    def api_base(self, url: str) -> OpenheimBuilder:
        return self._set("api_base", url)

    def record(self, path: str | Path | None) -> OpenheimBuilder:
        """Write every provider exchange to ``path`` (JSON Lines; see docs/pipelines.md)."""
        return self._set("record", str(path) if path else None)

    def replay(self, path: str | Path | None) -> OpenheimBuilder:
        """Serve every provider exchange from the recording at ``path``: no network, and a request that
        differs from the recording fails with ReplayMismatch."""
        return self._set("replay", str(path) if path else None)

    def max_iterations(self, n: int | None) -> OpenheimBuilder:
        return self._set("max_iterations", n)

    def max_tokens_total(self, n: int | None) -> OpenheimBuilder:
        """A token budget per turn (input + output over every iteration); a turn that reaches it stops with
        stop reason ``budget`` and ``AgentResult.budget`` saying the figure."""
        return self._set("max_tokens_total", n)

    def max_cost(self, dollars: float | None) -> OpenheimBuilder:
        """A dollar budget per turn (subagents included), at the model's ``[prices."provider/model"]``; a turn
        that reaches it stops with stop reason ``budget`` (``AgentResult.budget.kind == "cost"``)."""
        return self._set("max_cost", dollars)

    def turn_timeout_secs(self, seconds: float | None) -> OpenheimBuilder:
        """A wall-clock budget per turn; the running stream and tools are cancelled when it runs out
        (stop reason ``budget``)."""
        return self._set("turn_timeout_secs", seconds)

    def timeout_secs(self, n: int | None) -> OpenheimBuilder:
        return self._set("timeout_secs", n)

    def max_tokens(self, n: int | None) -> OpenheimBuilder:
        return self._set("max_tokens", n)

    def context_window(self, n: int | None) -> OpenheimBuilder:
        return self._set("context_window", n)

    def default_skills(self, skills: list[str]) -> OpenheimBuilder:
        return self._set("default_skills", list(skills))

    def work_dir(self, path: str | Path | None) -> OpenheimBuilder:
        return self._set("work_dir", path)

    def allow_shell(self, allow: bool | None) -> OpenheimBuilder:
        return self._set("allow_shell", allow)

    def data_dir(self, path: str | Path | None) -> OpenheimBuilder:
        return self._set("data_dir", path)

    def sandbox(
        self, mode: str | None = None, required: bool | None = None, network: bool | None = None
    ) -> OpenheimBuilder:
        """Override ``[sandbox]``: ``mode`` read-only | workspace-write | off, ``required`` (refuse commands the
        kernel cannot confine), ``network``; None keeps the config's value (docs/security.md)."""
        self._set("sandbox_mode", mode)
        self._set("sandbox_required", required or None)
        return self._set("sandbox_network", network)

    def allow(self, rule: str, source: str = "builder") -> OpenheimBuilder:
        """Add a permission rule that lets matching calls run without asking: ``read_file``,
        ``write_file(src/**)``, ``execute_command(git diff *)`` (see docs/pipelines.md)."""
        self._opts.setdefault("allow", []).append((rule, source))
        return self

    def deny(self, rule: str, source: str = "builder") -> OpenheimBuilder:
        """Add a permission rule that refuses matching calls, whatever else allows them."""
        self._opts.setdefault("deny", []).append((rule, source))
        return self

    def permissions(
        self, allow: list[str] | tuple[str, ...] = (), deny: list[str] | tuple[str, ...] = (), source: str = "builder"
    ) -> OpenheimBuilder:
        """``allow(rule)`` and ``deny(rule)`` for each rule given (``source`` names them in explanations)."""
        for rule in allow:
            self.allow(rule, source)
        for rule in deny:
            self.deny(rule, source)
        return self

    def mcp_server(self, name: str, config: McpServerConfig | dict) -> OpenheimBuilder:
        """Add an MCP server (dict keys as in [mcp_servers.NAME]: command, args, env, url, headers,
        tool_timeout_secs); it overrides a config.toml server of the same name."""
        (server,) = mcp_server_configs([{"name": name, **config} if isinstance(config, dict) else config])
        if server.name != name:
            server = replace(server, name=name)
        self._opts.setdefault("mcp_servers", {})[name] = server
        return self

    def mcp_config(self, path: str | Path | None) -> OpenheimBuilder:
        """Also use the servers of an ``mcpServers`` JSON file (as written for other MCP clients)."""
        return self._set("mcp_config", path)

    def check_model(self, enabled: bool = True) -> OpenheimBuilder:
        """Resolve the default model and its API key at build time (the default); a tool that never
        prompts, such as `openheim mcp`, turns it off."""
        return self._set("check_model", enabled)

    def tool(self, handler: ToolHandler | Callable[..., object]) -> OpenheimBuilder:
        """Offer a custom tool: a ToolHandler, or a plain function (described by its hints and docstring)."""
        if not isinstance(handler, FunctionTool) and inspect.isfunction(handler):
            handler = FunctionTool(handler)
        self._tools.append(check_handler(handler))
        return self

    def long_term_memory(self, memory: LongTermMemory) -> OpenheimBuilder:
        """Use this long-term memory (e.g. with your own EmbeddingClient) instead of the configured one."""
        return self._set("long_term_memory", memory)

    def llm_factory(self, factory: Callable[[AgentConfig], LlmClient | BlockingLlm]) -> OpenheimBuilder:
        """Use a custom provider: an LlmClient (``stream``), or any object with a blocking ``send``."""
        self._llm_factory = factory
        return self

    def build(self) -> OpenheimClient:
        from openheim.runtime.build import build_state  # the runtime loads with the first client (start-up seam)

        return OpenheimClient(build_state(self._opts, self._tools, self._llm_factory))
