"""OpenheimClient: the one door to the runtime, used by every front end and by embedders.

A front end opens a session here, starts turns with ``SessionHandle.start_turn`` and renders the
``Turn``'s events in its own medium. Nothing outside this module reaches the runtime's internals.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.core.models import (
    AgentResult,
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    Tool,
    Usage,
)

if TYPE_CHECKING:
    from openheim.checkpoints.store import TurnRecord
    from openheim.checkpoints.undo import UndoPlan, UndoResult
    from openheim.config.agent_config import AgentConfig
    from openheim.config.rules import Verdict
    from openheim.config.schema import Config, McpServerConfig
    from openheim.conversation.compaction import CompactionOutcome
    from openheim.conversation.history import ConversationMeta
    from openheim.conversation.skills import Skill
    from openheim.core.client_io import ClientIo
    from openheim.core.events import StreamEvent
    from openheim.core.llm.adapters import BlockingLlm
    from openheim.core.llm.base import LlmClient
    from openheim.core.permission import PermissionGate
    from openheim.core.structured import OutputSchema
    from openheim.core.tools import (
        ToolCapabilities,
        ToolExecutor,
        ToolHandler,
        ToolView,
    )
    from openheim.mcp.prompts import McpPrompt
    from openheim.mcp.status import McpServerStatus
    from openheim.memory.long_term import LongTermMemory
    from openheim.runtime.runtime import Runtime
    from openheim.runtime.turn import Turn


def mcp_server_configs(servers: list | tuple | None) -> list[McpServerConfig]:
    """Server configs from McpServerConfig objects or dicts ``{"name", "command", "args", "env"}`` /
    ``{"name", "url", "headers"}`` (a ConfigError says what is wrong with one)."""
    from openheim.config.schema import McpServerConfig, parse_mcp_server
    from openheim.errors import ConfigError

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


def to_blocks(prompt: str | list[ContentBlock], images: list[tuple[str, str]] | tuple = ()) -> list[ContentBlock]:
    """Prompt text (empty adds no block) followed by (base64 data, mime type) images, in order."""
    blocks: list[ContentBlock] = [TextBlock(prompt)] if isinstance(prompt, str) and prompt else []
    if not isinstance(prompt, str):
        blocks = list(prompt)
    blocks.extend(ImageBlock(data, mime) for data, mime in images)
    return blocks


@dataclass(eq=False)
class LoadedSession:
    """What resuming a stored session gives back besides its handle."""

    messages: list[Message]
    warning: str | None = None  # e.g. its provider is gone and the default one was used


class SessionHandle:
    """One conversation: start turns on it, cancel them, switch its model or mode."""

    def __init__(self, client: OpenheimClient, session_id: str) -> None:
        self._client = client
        self.id = session_id
        self._gate: PermissionGate | None = None
        self._io: ClientIo | None = None
        self._context_usage: Usage | None = None

    @property
    def _state(self) -> Runtime:
        return self._client.state

    def permission_gate(self, gate: PermissionGate) -> SessionHandle:
        """Ask ``gate`` before side-effect tool calls (default: allow all)."""
        from openheim.core.permission import check_gate

        self._gate = check_gate(gate)
        return self

    def client_io(self, io: ClientIo) -> SessionHandle:
        """Read and write files (and run commands) through ``io`` where it can."""
        self._io = io
        return self

    # --- turns -----------------------------------------------------------------------

    def start_turn(
        self,
        prompt: str | list[ContentBlock],
        *,
        images: list[tuple[str, str]] | tuple = (),
        extra_skills: list[str] | tuple[str, ...] = (),
        gate: PermissionGate | None = None,
        client_io: ClientIo | None = None,
        output_schema: dict | OutputSchema | None = None,
    ) -> Turn:
        """Start a turn on its own worker thread and return it at once.

        Raises SessionBusy while another turn runs on this session (one that was cancelled is waited
        for instead). ``gate`` and ``client_io`` override the session's own for this turn. With
        ``output_schema`` (a JSON Schema) the final answer must be JSON valid against it: the result's
        ``structured`` holds it, or, after one repair round, stop reason ``invalid_output`` and ``output_error``.
        """
        blocks = to_blocks(prompt, images)
        output = None
        if output_schema is not None:
            from openheim.core.structured import OutputSchema

            output = output_schema if isinstance(output_schema, OutputSchema) else OutputSchema.from_dict(output_schema)
        return self._state.start_turn(self.id, blocks, gate or self._gate, client_io or self._io, extra_skills, output)

    def prompt(
        self,
        prompt: str | list[ContentBlock],
        on_event: Callable[[StreamEvent], None] | None = None,
        images: list[tuple[str, str]] | tuple = (),
        extra_skills: list[str] | tuple[str, ...] = (),
        output_schema: dict | OutputSchema | None = None,
    ) -> AgentResult:
        """Shorthand for ``start_turn(...).result``: run one turn to its end; ``on_event`` sees every
        StreamEvent on the calling thread."""
        turn = self.start_turn(prompt, images=images, extra_skills=extra_skills, output_schema=output_schema)
        for batch in turn.batches():
            if on_event is not None:
                for event in batch:
                    on_event(event)
        result = turn.result
        self._context_usage = result.context_usage or self._context_usage
        return result

    def context_usage(self) -> Usage | None:
        """What the context held at the end of the last prompt() (None before the first one)."""
        return self._context_usage

    def stream(
        self,
        prompt: str | list[ContentBlock],
        *,
        images: list[tuple[str, str]] | tuple = (),
        extra_skills: list[str] | tuple[str, ...] = (),
        gate: PermissionGate | None = None,
        client_io: ClientIo | None = None,
    ) -> Turn:
        """Deprecated: the same as ``start_turn`` (kept because earlier versions documented it)."""
        return self.start_turn(prompt, images=images, extra_skills=extra_skills, gate=gate, client_io=client_io)

    def cancel(self) -> None:
        """Deprecated: cancel the session's running turn, if any; prefer ``turn.cancel()``."""
        self._state.cancel(self.id)

    @property
    def busy(self) -> bool:
        """Whether a turn is running on this session."""
        return self._state.session(self.id).in_flight

    # --- settings -----------------------------------------------------------------------

    def switch_model(self, provider: str | None, model: str | None = None) -> AgentConfig:
        return self._state.set_model(self.id, provider, model)

    def set_mode(self, mode: str) -> str:
        return self._state.set_mode(self.id, mode)

    @property
    def config(self) -> AgentConfig:
        return self._state.session(self.id).config

    @property
    def mode(self) -> str:
        return self._state.session(self.id).mode

    @property
    def cwd(self) -> Path:
        return self._state.session(self.id).cwd

    @property
    def has_history(self) -> bool:
        """Whether the conversation has been stored (it is, from its first turn on)."""
        return self._state.conversations.history.exists(self.id)

    def present(self, tool_name: str, args: dict | None, with_diff: bool = False) -> ToolView:
        """How a call of ``tool_name`` looks in this session (title, kind, locations; a diff if asked)."""
        from openheim.core.tools import ViewContext

        where = ViewContext(self.cwd, self._io, with_diff=with_diff, root=self._state.sandbox_for(self.cwd)[0])
        return self._tools().present(tool_name, args, where)

    def _tools(self) -> ToolExecutor:
        return self._state.turn_tools(self._state.session(self.id))

    def tools(self) -> list[Tool]:
        """The tools this session offers now: built-ins, custom tools, delegate_task, and its MCP servers'
        (those ready)."""
        return self._tools().definitions()

    def tool_capabilities(self, name: str) -> ToolCapabilities:
        return self._tools().capabilities(name)

    def suggested_rules(self, tool_name: str, arguments: str) -> list[str]:
        """The allow rules covering exactly this call, as "allow always" saves them for the project."""
        from openheim.config.rules import suggested_rules
        from openheim.core.tools import parse_arguments

        root, cwd = self._state.sandbox_for(self.cwd)
        return suggested_rules(tool_name, parse_arguments(arguments), str(root), str(cwd))

    def save_project_rules(self, rules: list[str]) -> Path | None:
        """Append allow rules to the project's ``.openheim/settings.toml`` (the innermost one from the
        sandbox root down to this session's cwd, else the root's); returns the file."""
        from openheim.config.project_settings import save_allow_rule

        root, cwd = self._state.sandbox_for(self.cwd)
        path = None
        for rule in rules:
            path = save_allow_rule(root, cwd, rule, self._state.settings.data_dir)
        return path

    def mcp_servers(self, wait: float = 0.0) -> list[McpServerStatus]:
        """The MCP servers this session sees (configured, its project's, its own), waiting up to ``wait``
        seconds for those still starting."""
        return self._state.mcp_statuses(self._state.session(self.id), wait)

    def mcp_prompts(self, wait: float = 0.0) -> list[McpPrompt]:
        """The prompts of this session's MCP servers (``server/name``, description, arguments), waiting up to
        ``wait`` seconds for servers still starting."""
        return self._state.mcp_prompts(self._state.session(self.id), wait)

    def expand_mcp_prompt(self, name: str, arguments: str = "") -> str:
        """The text MCP prompt ``name`` (``server/name`` or ``server.name``) makes with ``arguments`` (``key=value``
        pairs), to send as a prompt. NotFound for an unknown prompt, InvalidArgument for a missing required
        argument or text that is not a pair, ToolExecutionError when the server fails; each one line."""
        return self._state.expand_mcp_prompt(self._state.session(self.id), name, arguments)

    def compact(self, on_event: Callable[[StreamEvent], None] | None = None) -> CompactionOutcome:
        """Summarise the conversation now; the outcome's ``error`` says why when it could not be."""
        return self._state.compact(self.id, on_event)

    def fork(self) -> SessionHandle:
        """A new session that starts from this one's current point (history copied, checkpoints shared)."""
        return self._client.fork_session(self.id)

    def changes(self) -> list[TurnRecord]:
        """Each turn's changed files (only turns that changed files under the sandbox root)."""
        return self._client.session_changes(self.id)

    def plan_undo(self, turns: int = 1) -> UndoPlan:
        """What undoing the last ``turns`` file-changing turns would restore (nothing is written)."""
        return self._client.plan_undo(self.id, turns)

    def undo(self, turns: int = 1, force: bool = False) -> UndoResult:
        """Restore the files the last ``turns`` turns changed; files changed since are protected unless ``force``."""
        if self.busy:
            from openheim.errors import SessionBusy

            raise SessionBusy(self.id)
        return self._client.undo(self.plan_undo(turns), force)

    def close(self) -> None:
        """Cancel what runs and forget the live session (its history stays on disk)."""
        self._client.close_session(self.id)


class OpenheimClient:
    """The library facade around the runtime. ``state`` is internal: front ends never touch it."""

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
        return self.state.config

    @property
    def data_dir(self) -> Path:
        return self.state.settings.data_dir

    @property
    def work_dir(self) -> Path | None:
        """The configured sandbox root (canonical), or None: each session is rooted at its cwd."""
        return self.state.settings.work_dir

    def public_config(self, work_dir: str | Path | None = None) -> dict:
        """The config as clients may see it: no keys, no data_dir, scrubbed URLs (``work_dir`` if none is set)."""
        from openheim.config.public_view import public_view

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
    ) -> SessionHandle:
        """A new session rooted at ``cwd``. ``mcp_servers`` are its own (started now, in the background,
        and stopped when it closes), added to the configured ones. ``hold``: a connected client shows it,
        so it is never evicted to make room until ``let_go``; when every live session is running or held
        and the map is full, TooManySessions."""
        configs = mcp_server_configs(mcp_servers)
        session = self.state.new_session(Path(cwd or os.getcwd()).absolute(), model, provider, skills, configs, hold)
        return SessionHandle(self, session.id)

    def resume_session(
        self,
        session_id: str,
        cwd: str | Path | None = None,
        mcp_servers: list[McpServerConfig | dict] | None = None,
        hold: bool = False,
    ) -> tuple[SessionHandle, LoadedSession]:
        configs = mcp_server_configs(mcp_servers) if mcp_servers is not None else None
        loaded = self.state.load_session(session_id, Path(cwd).absolute() if cwd else None, configs, hold)
        return SessionHandle(self, loaded.session.id), LoadedSession(loaded.messages, loaded.warning)

    def let_go(self, session_id: str) -> None:
        """A client that held the session (``hold=True``) no longer shows it; it may be evicted once idle."""
        self.state.sessions.let_go(session_id)

    def session(self, session_id: str) -> SessionHandle:
        """The handle of a live session (NotFound if there is none with that id)."""
        return SessionHandle(self, self.state.session(session_id).id)

    def list_sessions(self, cwd: str | None = None, include_failed: bool = False) -> list[ConversationMeta]:
        """Stored sessions, newest first (in ``cwd`` when given); sessions whose first turn failed before any
        reply are left out unless ``include_failed``."""
        return self.state.list_sessions(cwd, include_failed)

    def get_session(self, session_id: str) -> list[Message]:
        """Deprecated: the messages of ``stored_session(session_id)``."""
        return self.stored_session(session_id)[1]

    def stored_session(self, session_id: str) -> tuple[ConversationMeta, list[Message]]:
        """A stored conversation's metadata and messages (InvalidArgument for a malformed id, NotFound)."""
        history = self.state.conversations.history
        conv = history.load(history.resolve_id(session_id))
        return conv.meta, conv.messages

    def delete_session(self, session_id: str) -> None:
        self.state.delete_session(session_id)

    def cancel(self, session_id: str) -> None:
        """Deprecated: cancel the turn running on ``session_id``, if any (unknown ids are ignored); prefer
        ``turn.cancel()``."""
        self.state.cancel(session_id)

    def close_session(self, session_id: str) -> None:
        """Cancel what runs on a live session and forget it (its history stays on disk)."""
        self.state.close_session(session_id)

    # --- long sessions: fork, checkpoints and undo ------------------------------------------------

    def fork_session(self, session_id: str) -> SessionHandle:
        """A new live session starting where the stored ``session_id`` is now (history copied, checkpoints
        shared)."""
        return self.resume_session(self.state.fork(session_id))[0]

    def session_changes(self, session_id: str) -> list[TurnRecord]:
        """The turn records of a session: each file-changing turn's added, modified and deleted files."""
        from openheim.conversation.history import check_session_id

        return self.state.long_sessions.turns(check_session_id(session_id))

    def plan_undo(self, session_id: str, turns: int = 1) -> UndoPlan:
        """What undoing the session's last ``turns`` file-changing turns would do (nothing is written)."""
        from openheim.conversation.history import check_session_id

        return self.state.long_sessions.plan_undo(check_session_id(session_id), turns)

    def undo(self, plan: UndoPlan, force: bool = False) -> UndoResult:
        """Carry out ``plan``: InvalidArgument naming the files changed since, unless ``force``."""
        live = self.state.sessions.get(plan.session_id)
        if live is not None and live.in_flight:
            from openheim.errors import SessionBusy

            raise SessionBusy(plan.session_id)
        return self.state.long_sessions.apply_undo(plan, force)

    # --- what the runtime offers ---------------------------------------------------------------

    def models(self) -> list[tuple[str, str]]:
        """(provider, model) pairs the config offers."""
        return self.state.models()

    def tools(self) -> list[Tool]:
        """Built-in and custom tools, plus the tools of configured MCP servers that are ready."""
        return self.state.runtime_tools().definitions()

    def tool_capabilities(self, name: str) -> ToolCapabilities:
        return self.state.runtime_tools().capabilities(name)

    def explain_permission(self, tool_name: str, args: object, cwd: str | Path | None = None) -> Verdict:
        """What the permission rules (config, builder, and the project's for ``cwd``) say about a call."""
        from openheim.config.rules import decide

        user, project, root = self.state.permission_rules(Path(cwd or os.getcwd()).absolute())
        return decide(tool_name, args, user, project, str(root), str(Path(cwd or os.getcwd()).absolute()))

    def mcp_servers(self, wait: float = 0.0, cwd: str | Path | None = None) -> list[McpServerStatus]:
        """Status of the configured MCP servers (config.toml, builder, --mcp-config), waiting up to ``wait``
        seconds for those still starting. With ``cwd``, also that directory's project ``.mcp.json`` servers:
        started for the check when the file is trusted, listed as untrusted otherwise."""
        return self.state.mcp_statuses(None, wait, Path(cwd).absolute() if cwd else None)

    def memory(self) -> LongTermMemory | None:
        """The long-term memory behind the remember / search_memory / edit_memory / forget tools."""
        return self.state.long_term_memory

    def skills(self) -> list[Skill]:
        """The installed skills (name and description)."""
        return self.state.conversations.skills.list()

    def save_theme(self, name: str) -> None:
        """Save ``name`` as ``[tui].theme_color`` in the config file, keeping its comments and layout."""
        from openheim.config.edit import save_theme

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
            from dataclasses import replace

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
        import inspect

        from openheim.core.function_tool import FunctionTool
        from openheim.core.tools import check_handler

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
        from openheim.runtime.build import build_state

        return OpenheimClient(build_state(self._opts, self._tools, self._llm_factory))
