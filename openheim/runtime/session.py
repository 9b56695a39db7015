"""Session: one live conversation and every operation on it, each written once over its own state.

``OpenheimClient.new_session`` / ``resume_session`` / ``session`` hand it out; a front end starts turns
with ``start_turn`` and renders the ``Turn``'s events in its own medium.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.config.project_settings import save_allow_rule
from openheim.config.rules import suggested_rules
from openheim.conversation.lease import Lease
from openheim.core.mode import AgentMode
from openheim.core.models import AgentResult, ContentBlock, ImageBlock, TextBlock, Tool, Usage
from openheim.core.permission import check_gate
from openheim.core.structured import OutputSchema
from openheim.core.tools import ViewContext, parse_arguments
from openheim.core.turn_context import CancelToken
from openheim.errors import InvalidArgument, SessionBusy
from openheim.runtime.recorder import TurnRecorder
from openheim.runtime.stages import TurnInputs, run_stages
from openheim.runtime.turn import Turn

if TYPE_CHECKING:
    from openheim.checkpoints.store import TurnRecord
    from openheim.checkpoints.undo import UndoPlan, UndoResult
    from openheim.config.agent_config import AgentConfig
    from openheim.conversation.compaction import CompactionOutcome
    from openheim.core.client_io import ClientIo
    from openheim.core.events import StreamEvent
    from openheim.core.permission import PermissionGate
    from openheim.core.tools import ToolCapabilities, ToolExecutor, ToolView
    from openheim.mcp.prompts import McpPrompt
    from openheim.mcp.status import McpServerStatus
    from openheim.runtime.live import SessionMap, SessionState
    from openheim.runtime.services import Services

OnEvent = Callable[["StreamEvent"], None]


def to_blocks(prompt: str | list[ContentBlock], images: list[tuple[str, str]] | tuple = ()) -> list[ContentBlock]:
    """Prompt text (empty adds no block) followed by (base64 data, mime type) images, in order."""
    blocks: list[ContentBlock] = [TextBlock(prompt)] if isinstance(prompt, str) and prompt else []
    if not isinstance(prompt, str):
        blocks = list(prompt)
    blocks.extend(ImageBlock(data, mime) for data, mime in images)
    return blocks


class Session:
    """One live conversation: start turns on it, cancel them, switch its model or mode, compact, fork, undo."""

    def __init__(
        self, live: SessionState, services: Services, sessions: SessionMap[Session], fork: Callable[[str], Session]
    ) -> None:
        self.live = live  # the runtime's state of this session (internal)
        self._services = services
        self._sessions = sessions  # the live map it belongs to
        self._fork = fork  # the runtime's fork of a stored session: the new live session
        self._gate: PermissionGate | None = None
        self._io: ClientIo | None = None
        self._context_usage: Usage | None = None

    @property
    def id(self) -> str:
        return self.live.id

    def permission_gate(self, gate: PermissionGate) -> Session:
        """Ask ``gate`` before side-effect tool calls (default: allow all)."""
        self._gate = check_gate(gate)
        return self

    def client_io(self, io: ClientIo) -> Session:
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
        output = output_schema
        if isinstance(output, dict):
            output = OutputSchema.from_dict(output)
        inputs = TurnInputs(to_blocks(prompt, images), gate or self._gate, client_io or self._io, extra_skills, output)
        live = self.live
        with live.turn_lock:
            previous = self._previous_turn()

            def body(on_event: OnEvent, cancel: CancelToken, sync: Callable[[], None]) -> AgentResult:
                try:
                    return run_stages(self._services, live, inputs, on_event, cancel, sync)
                finally:
                    live.touch()

            def present(tool_name: str, args: dict | None) -> ToolView:
                return self._present(tool_name, args, inputs.client_io, turn.token, True)

            turn = Turn(live.id, body, present, after=previous, timeout=live.config.turn_timeout_secs)
            live.turn = turn
        return turn.start()

    def _previous_turn(self) -> Turn | None:
        """The cancelled turn a new one must wait for; SessionBusy while one runs that was not cancelled."""
        previous = self.live.turn
        if previous is not None and previous.running:
            if not previous.cancelled:
                raise SessionBusy(self.id)
            return previous
        if self.live.in_flight:
            raise SessionBusy(self.id)
        return None

    def prompt(
        self,
        prompt: str | list[ContentBlock],
        on_event: OnEvent | None = None,
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

    def cancel(self) -> None:
        """Cancel the running turn, if any (the same as ``turn.cancel()`` on it)."""
        self.live.stop()

    @property
    def busy(self) -> bool:
        """Whether a turn is running on this session."""
        return self.live.in_flight

    def _check_idle(self) -> None:
        with self.live.turn_lock:
            if self.live.in_flight:
                raise SessionBusy(self.id)

    # --- settings -----------------------------------------------------------------------

    def switch_model(self, provider: str | None, model: str | None = None) -> AgentConfig:
        self.live.config = self._services.resolve_model(provider, model)
        self.live.fitter = None  # a new model has its own window and token ratio
        self._persist_settings()
        return self.live.config

    def set_mode(self, mode: str) -> str:
        self.live.mode = AgentMode.parse(mode).value
        self._persist_settings()
        return self.live.mode

    def _persist_settings(self) -> None:
        """Model and mode switches survive a reload (when the conversation exists)."""
        history = self._services.conversations.history
        if self.live.in_flight or not history.exists(self.id):
            return
        conv = history.load(self.id)
        conv.meta.model, conv.meta.provider = self.live.config.model, self.live.config.provider_name
        conv.meta.mode = self.live.mode
        history.save_meta(conv)

    @property
    def config(self) -> AgentConfig:
        return self.live.config

    @property
    def mode(self) -> str:
        return self.live.mode

    @property
    def cwd(self) -> Path:
        return self.live.cwd

    @property
    def has_history(self) -> bool:
        """Whether the conversation has been stored (it is, from its first turn on)."""
        return self._services.conversations.history.exists(self.id)

    # --- tools, rules and MCP ---------------------------------------------------------------

    def present(self, tool_name: str, args: dict | None, with_diff: bool = False) -> ToolView:
        """How a call of ``tool_name`` looks in this session (title, kind, locations; a diff if asked)."""
        return self._present(tool_name, args, self._io, None, with_diff)

    def _present(
        self, name: str, args: dict | None, io: ClientIo | None, token: CancelToken | None, diff: bool = False
    ) -> ToolView:
        root = self._services.sandbox_for(self.cwd)[0]
        return self._tools().present(name, args, ViewContext(self.cwd, io, token, with_diff=diff, root=root))

    def _tools(self) -> ToolExecutor:
        return self._services.turn_tools(self.live)

    def tools(self) -> list[Tool]:
        """The tools this session offers now: built-ins, custom tools, delegate_task, and its MCP servers'
        (those ready)."""
        return self._tools().definitions()

    def tool_capabilities(self, name: str) -> ToolCapabilities:
        return self._tools().capabilities(name)

    def suggested_rules(self, tool_name: str, arguments: str) -> list[str]:
        """The allow rules covering exactly this call, as "allow always" saves them for the project."""
        root, cwd = self._services.sandbox_for(self.cwd)
        return suggested_rules(tool_name, parse_arguments(arguments), str(root), str(cwd))

    def save_project_rules(self, rules: list[str]) -> Path | None:
        """Append allow rules to the project's ``.openheim/settings.toml`` (the innermost one from the
        sandbox root down to this session's cwd, else the root's); returns the file."""
        root, cwd = self._services.sandbox_for(self.cwd)
        path = None
        for rule in rules:
            path = save_allow_rule(root, cwd, rule, self._services.settings.data_dir)
        return path

    def mcp_servers(self, wait: float = 0.0) -> list[McpServerStatus]:
        """The MCP servers this session sees (configured, its project's, its own), waiting up to ``wait``
        seconds for those still starting."""
        return self._services.mcp.statuses(self.live, wait, None)

    def mcp_prompts(self, wait: float = 0.0) -> list[McpPrompt]:
        """The prompts of this session's MCP servers (``server/name``, description, arguments), waiting up to
        ``wait`` seconds for servers still starting."""
        return self._services.mcp.prompts(self.live, wait)

    def expand_mcp_prompt(self, name: str, arguments: str = "") -> str:
        """The text MCP prompt ``name`` (``server/name`` or ``server.name``) makes with ``arguments`` (``key=value``
        pairs), to send as a prompt. NotFound for an unknown prompt, InvalidArgument for a missing required
        argument or text that is not a pair, ToolExecutionError when the server fails; each one line."""
        return self._services.mcp.expand_prompt(self.live, name, arguments)

    # --- long sessions: compaction, fork, checkpoints and undo ------------------------------------

    def compact(self, on_event: OnEvent | None = None) -> CompactionOutcome:
        """Summarise the conversation now; the outcome's ``error`` says why when it could not be."""
        self._check_idle()
        services, live = self._services, self.live
        history = services.conversations.history
        with Lease.acquire(history.history_dir, self.id):  # a turn started meanwhile gets SessionLocked
            conv = services.conversation_for(live)
            if not conv.messages:
                raise InvalidArgument("nothing to compact: the session has no messages yet")
            compactor = services.long_sessions.compactor(live.config, conv, services.resolve_model, services.llm_for)
            recorder = TurnRecorder(history, conv, on_event or (lambda e: None))
            ratio = live.fitter.bytes_per_token if live.fitter is not None else 4.0
            try:
                return compactor.compact(conv.messages, ratio, CancelToken(), recorder, manual=True)
            finally:
                recorder.close()
                live.touch()

    def fork(self) -> Session:
        """A new session that starts from this one's current point (history copied, checkpoints shared)."""
        self._check_idle()
        return self._fork(self.id)

    def changes(self) -> list[TurnRecord]:
        """Each turn's changed files (only turns that changed files under the sandbox root)."""
        return self._services.long_sessions.turns(self.id)

    def plan_undo(self, turns: int = 1) -> UndoPlan:
        """What undoing the last ``turns`` file-changing turns would restore (nothing is written)."""
        return self._services.long_sessions.plan_undo(self.id, turns)

    def undo(self, turns: int = 1, force: bool = False, plan: UndoPlan | None = None) -> UndoResult:
        """Restore the files the last ``turns`` turns changed (or carry out ``plan``, from ``plan_undo``); files
        changed since are protected (InvalidArgument naming them) unless ``force``."""
        self._check_idle()
        return self._services.long_sessions.apply_undo(plan or self.plan_undo(turns), force)

    # --- its place in the runtime -----------------------------------------------------------

    def let_go(self) -> None:
        """A client that held the session (``hold=True``) no longer shows it; it may be evicted once idle."""
        self._sessions.let_go(self.id)

    def close(self) -> None:
        """Cancel what runs and forget the live session (its history stays on disk)."""
        self._sessions.remove(self.id)
        self.live.stop()
