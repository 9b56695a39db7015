"""delegate_task: hand a self-contained task to a subagent with its own prompt, model and tools."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from openheim.core.agent import run_turn
from openheim.core.events import SubagentEvent, ToolCall, ToolResult, UsageReport
from openheim.core.models import Message, StopReason
from openheim.core.permission import SubagentGate
from openheim.core.tools import BaseTool, ScopedExecutor, ToolCapabilities
from openheim.errors import OpenheimError, ToolExecutionError

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.core.events import StreamEvent
    from openheim.core.llm.base import LlmClient
    from openheim.core.tools import ToolExecutor, ToolView, ViewContext
    from openheim.core.turn_context import TurnContext
    from openheim.subagents.profiles import AgentProfile

INLINE = "inline"


@dataclass(eq=False)
class Delegation:
    """What one turn's delegate_task works with: the profiles, the session's live model, the parent's tools."""

    profiles: list[AgentProfile]
    session_config: AgentConfig
    resolve: Callable[[str | None, str | None], AgentConfig]  # (provider, model) -> config
    llm_for: Callable[[AgentConfig], LlmClient]
    executor: ToolExecutor  # the parent's tools, without delegate_task: no recursion
    max_parallel: int = 4  # subagents of one turn that run at once (config: max_parallel_subagents)
    models: frozenset[tuple[str, str]] | None = None  # (provider, model) pairs the model may pick; None: any
    slots: threading.BoundedSemaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.slots = threading.BoundedSemaphore(max(1, self.max_parallel))


def describe(profiles: list[AgentProfile]) -> str:
    """The tool description: what delegation is for, and the profiles there are."""
    head = (
        "Delegate a self-contained task to a subagent that works on its own (with its own system prompt, "
        "model and tools, in the same sandbox) and returns its final answer. Give it everything it needs "
        "in 'task': it does not see this conversation."
    )
    if not profiles:
        return head + (
            "\n\nNo subagent profiles are configured; pass an inline 'system_prompt' describing the subagent instead."
        )
    lines = [f"- `{p.name}`: {p.description or '(no description provided)'}" for p in profiles]
    return head + "\n\nAvailable subagents (pass one as 'agent', or an inline 'system_prompt'):\n" + "\n".join(lines)


def parameters(profiles: list[AgentProfile]) -> dict:
    agent: dict = {"type": "string", "description": "The subagent profile to run"}
    if profiles:
        agent["enum"] = [p.name for p in profiles]
    return {
        "type": "object",
        "properties": {
            "agent": agent,
            "system_prompt": {
                "type": "string",
                "description": "An inline subagent's system prompt (instead of 'agent')",
            },
            "task": {"type": "string", "description": "The task, with all the context the subagent needs"},
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Only these tools (default: the profile's, else all of yours)",
            },
            "model": {"type": "string", "description": "Model to run it on (default: the profile's, else yours)"},
            "provider": {"type": "string", "description": "Provider of that model"},
            "max_iterations": {"type": "integer", "minimum": 1, "description": "Its iteration limit (at most yours)"},
        },
        "required": ["task"],
    }


class DelegateTool(BaseTool):
    name = "delegate_task"
    capabilities = ToolCapabilities(read_only=False, kind="other")

    def __init__(self, delegation: Delegation) -> None:
        self.delegation = delegation
        self.profiles = {p.name: p for p in delegation.profiles}
        self.description = describe(delegation.profiles)
        self.parameters = parameters(delegation.profiles)

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        from openheim.core.tool_view import ToolView, short

        args = args or {}
        who = args.get("agent") or INLINE
        task = args.get("task")
        return ToolView(
            f"Delegate to {short(who)}: {short(task, 120)}" if task else f"Delegate to {short(who)}",
            self.capabilities.kind,
        )

    def execute(self, args: dict, ctx: TurnContext) -> str:
        task = args.get("task")
        if not isinstance(task, str) or not task.strip():
            raise ToolExecutionError("missing 'task' argument")
        tools = args.get("tools")
        if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)):
            raise ToolExecutionError("'tools' must be an array of strings")
        profile, refusal = self._profile(args)
        if profile is None:
            return refusal
        try:
            cfg, note = self._config(profile, args)
        except OpenheimError as e:
            why = e.message if isinstance(e, ToolExecutionError) else str(e)
            raise ToolExecutionError(f"cannot start subagent '{profile.name}': {why}") from None
        if not self._wait_for_a_slot(ctx):
            return ""
        try:
            return self._run(profile, task, cfg, tools if tools is not None else profile.tools, ctx) + note
        finally:
            self.delegation.slots.release()

    def _wait_for_a_slot(self, ctx: TurnContext) -> bool:
        """Take one of the turn's max_parallel_subagents slots; False when the turn is cancelled first."""
        while not ctx.cancel.cancelled:
            if self.delegation.slots.acquire(timeout=0.1):
                if ctx.cancel.cancelled:
                    self.delegation.slots.release()
                    return False
                return True
        return False

    def _profile(self, args: dict) -> tuple[AgentProfile | None, str]:
        """The profile to run, or None and the text that tells the model why not."""
        from openheim.subagents.profiles import AgentProfile

        agent, inline = args.get("agent"), args.get("system_prompt")
        names = ", ".join(self.profiles) or "(none)"
        if agent and inline:
            return None, "Pass either 'agent' or 'system_prompt', not both."
        if inline:
            if not isinstance(inline, str):
                raise ToolExecutionError("'system_prompt' must be a string")
            return AgentProfile(INLINE, inline), ""
        if not agent:
            return None, (
                f"Missing subagent: pass 'agent' (one of: {names}) or an inline 'system_prompt' "
                "describing the subagent."
            )
        profile = self.profiles.get(agent) if isinstance(agent, str) else None
        if profile is None:
            return None, (
                f"Unknown subagent '{agent}'. Available subagents: {names}. You can also pass an "
                "inline 'system_prompt' instead of 'agent'."
            )
        return profile, ""

    def _config(self, profile: AgentProfile, args: dict) -> tuple[AgentConfig, str]:
        """The subagent's model and iteration limit (clamped to the parent's), and a note when clamped."""
        d = self.delegation
        provider = args.get("provider") or profile.provider
        model = args.get("model") or profile.model
        cfg = d.session_config if not (provider or model) else d.resolve(provider, model)
        picked = (cfg.provider_name, cfg.model)
        own = (d.session_config.provider_name, d.session_config.model)
        if (
            (args.get("provider") or args.get("model"))
            and d.models is not None
            and picked != own
            and picked not in d.models
        ):
            listed = ", ".join(f"{p}/{m}" for p, m in sorted(d.models))
            raise ToolExecutionError(
                f"model '{cfg.model}' of provider '{cfg.provider_name}' is not one this "
                f"configuration lists; pick one of: {listed}"
            )
        limit = d.session_config.max_iterations
        wanted = args.get("max_iterations") or profile.max_iterations
        note = ""
        if isinstance(wanted, int) and not isinstance(wanted, bool) and wanted >= 1:
            if wanted > limit:
                note = (
                    f"\n\n[Note: max_iterations {wanted} is above this session's limit; subagent "
                    f"'{profile.name}' ran with {limit}.]"
                )
            limit = min(wanted, limit)
        return cfg.with_(max_iterations=limit), note

    def _run(
        self,
        profile: AgentProfile,
        task: str,
        cfg: AgentConfig,
        tools: tuple[str, ...] | list[str] | None,
        ctx: TurnContext,
    ) -> str:
        executor = self.delegation.executor
        if tools is not None:
            executor = ScopedExecutor(executor, tools)
        parent = ctx.tool_call_id or ""
        gate = SubagentGate(ctx.gate, profile.name, parent) if ctx.gate is not None else None

        def forward(event: StreamEvent) -> None:
            if ctx.emit is not None and isinstance(event, (ToolCall, ToolResult, UsageReport)):
                ctx.emit(SubagentEvent(profile.name, parent, event))

        history = [Message.user(task)]
        result = run_turn(
            self.delegation.llm_for(cfg),
            executor,
            cfg,
            history,
            replace(ctx, gate=gate),
            forward,
            Message.system(profile.system_prompt) if profile.system_prompt else None,
        )
        if result.stop_reason is StopReason.CANCELLED or ctx.cancel.cancelled:
            return ""
        text = result.final_response or _last_text(history)
        if result.stop_reason is StopReason.MAX_ITERATIONS:
            text += (
                f"\n\n[Note: subagent '{profile.name}' reached its iteration limit ({cfg.max_iterations}) "
                "before finishing — this answer may be incomplete.]"
            )
        if result.budget is not None:
            text += f"\n\n[Note: subagent '{profile.name}' {result.budget.notice} — this answer may be incomplete.]"
        return text


def _last_text(history: list[Message]) -> str:
    for message in reversed(history):
        if message.role == "assistant" and message.text():
            return message.text() or ""
    return ""
