"""The turn's body as named stages, run in order on the Turn's worker thread:

tools (the tool set, MCP wait, checkpoint, mode) → gate (permission rules, the front end's questions, the cost
budget) → hooks (the user's and the project's) → context (the TurnContext) → run (under the session's lease:
the conversation, the system prompt, the user's message, the agent loop, stop hooks) → settle (usage, cost,
failure flag, the recorder and checkpoint closed).

Everything that can fail before the model is asked comes before the prompt is stored, so a turn that cannot
start leaves no unanswered prompt behind. A new feature adds a stage here or a line in one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from openheim.conversation.lease import Lease
from openheim.core.agent import run_turn
from openheim.core.asking import AskTheFrontEnd
from openheim.core.context import ContextFitter
from openheim.core.events import MessageAppended, Notice, StreamEvent
from openheim.core.mode import tools_for_mode
from openheim.core.models import AgentResult, ContentBlock, Message
from openheim.core.permission import AllowAll, RememberingGate
from openheim.core.spend import Spend
from openheim.core.turn_context import CancelToken, TurnContext
from openheim.errors import ConfigError
from openheim.runtime.hooks import after_turn, before_prompt, turn_hooks
from openheim.runtime.recorder import TurnRecorder

if TYPE_CHECKING:
    from pathlib import Path

    from openheim.checkpoints.turn import TurnCheckpoint
    from openheim.config.agent_config import AgentConfig
    from openheim.conversation.compaction import Compactor
    from openheim.conversation.history import Conversation
    from openheim.core.client_io import ClientIo
    from openheim.core.hooks import HookRunner
    from openheim.core.llm.base import LlmClient
    from openheim.core.permission import PermissionGate
    from openheim.core.structured import OutputSchema
    from openheim.core.tools import ToolExecutor
    from openheim.runtime.live import SessionState
    from openheim.runtime.services import Services

OnEvent = Callable[[StreamEvent], None]


@dataclass
class TurnInputs:
    """What the front end asked for: the prompt and this turn's gate, client I/O, skills and output schema."""

    blocks: list[ContentBlock]
    gate: PermissionGate | None = None
    client_io: ClientIo | None = None
    extra_skills: list[str] | tuple[str, ...] = ()
    output: OutputSchema | None = None


@dataclass
class TurnWork:
    """What the stages build up, one field group per stage."""

    services: Services
    live: SessionState
    inputs: TurnInputs
    on_event: OnEvent
    cancel: CancelToken
    sync: Callable[[], None] | None
    root: Path | None = None
    cwd: Path | None = None
    llm: LlmClient | None = None
    every_tool: ToolExecutor | None = None  # tools: the session's and delegate_task
    tools: ToolExecutor | None = None  # those the session's mode offers
    checkpoint: TurnCheckpoint | None = None
    gate: PermissionGate | None = None  # gate
    hooks: HookRunner | None = None  # hooks
    ctx: TurnContext | None = None  # context
    conv: Conversation | None = None  # run
    system: Message | None = None
    compactor: Compactor | None = None
    recorder: TurnRecorder | None = None


def run_stages(
    services: Services,
    live: SessionState,
    inputs: TurnInputs,
    on_event: OnEvent,
    cancel: CancelToken,
    sync: Callable[[], None] | None,
) -> AgentResult:
    """One turn, stage by stage (the Turn owns busy and cancel)."""
    work = TurnWork(services, live, inputs, on_event, cancel, sync)
    tools_stage(work)
    gate_stage(work)
    hooks_stage(work)
    context_stage(work)
    history = services.conversations.history
    with Lease.acquire(history.history_dir, live.id):
        prompt_stage(work)
        try:
            result = loop_stage(work)
        except BaseException:
            assert work.conv is not None
            # a session that never got a reply (server down, a bad key) stays out of the lists
            work.conv.meta.failed = not any(m.role == "assistant" for m in work.conv.messages)
            raise
        finally:
            settle_stage(work)
    return result


def tools_stage(work: TurnWork) -> None:
    """The model's client, the sandbox, and the tools the session's mode offers. MCP servers have been
    starting in the background: the never-seen ones are waited for (bounded, cancellable), said through the
    turn's events. The checkpoint wraps the tools, so files are saved before the first tool changes them."""
    services, live = work.services, work.live
    work.llm = services.llm_for(live.config)
    work.root, work.cwd = services.sandbox_for(live.cwd)
    if live.tools is not None:
        base = live.tools.for_turn(work.cancel, lambda line, level: work.on_event(Notice(line, level)))
    else:
        base = services.registry
    work.checkpoint = services.long_sessions.checkpoint(live.id, work.root)
    if work.checkpoint is not None:
        base = work.checkpoint.wrap(base)
    work.every_tool = services.turn_tools(live, base)
    work.tools = tools_for_mode(work.every_tool, live.mode)


def gate_stage(work: TurnWork) -> None:
    """The permission gate: the front end's (questions go out as this turn's events), remembering the
    session's approvals, behind the permission rules; a dollar budget needs the model's price."""
    assert work.every_tool is not None and work.root is not None and work.cwd is not None
    asked = work.inputs.gate
    if isinstance(asked, AskTheFrontEnd):
        asked = asked.for_turn(work.on_event)
    remembering = RememberingGate(asked or AllowAll(), work.live.approvals, work.every_tool.capabilities)
    work.gate = work.services.rules_gate(remembering, asked, work.root, work.cwd, work.every_tool)
    check_cost_budget(work.live.config)


def hooks_stage(work: TurnWork) -> None:
    """The user's ``[[hooks]]`` and the trusted project's, or None when none is configured."""
    services = work.services
    assert work.root is not None and work.cwd is not None
    settings = services.settings
    work.hooks = turn_hooks(
        services.config, settings.data_dir, work.live.id, work.root, work.cwd, settings.secret_env_vars
    )


def context_stage(work: TurnWork) -> None:
    """What every tool call of the turn sees, and the session's context fitter (kept across turns)."""
    assert work.root is not None
    work.ctx = TurnContext(
        cancel=work.cancel,
        work_dir=work.root,
        cwd=work.cwd,
        gate=work.gate,
        client_io=work.inputs.client_io,
        session_id=work.live.id,
        secret_env_vars=work.services.settings.secret_env_vars,
        emit=work.on_event,
        sync=work.sync,
        spend=Spend(work.live.spent),
        hooks=work.hooks,
    )
    if work.live.fitter is None:
        work.live.fitter = ContextFitter(work.live.config.context_window)


def prompt_stage(work: TurnWork) -> None:
    """Under the lease: prompt hooks, the conversation, the system prompt, the compactor, and the user's
    message stored before the model is asked."""
    services, live, ctx = work.services, work.live, work.ctx
    assert ctx is not None and work.root is not None and work.cwd is not None
    history = services.conversations.history
    blocks = list(work.inputs.blocks)
    if work.hooks is not None:
        blocks = before_prompt(work.hooks, blocks, not live.hooked, history.exists(live.id), work.cancel)
        live.hooked = True
    work.conv = conv = services.conversation_for(live)
    if conv.meta.cost and not live.spent:  # a resumed session's running total
        live.spent = conv.meta.cost
    ctx.spend.before = live.spent
    skills = list(work.inputs.extra_skills)
    work.system = services.conversations.prepare(conv, work.root, work.cwd, extra_skills=skills).build()
    work.compactor = services.long_sessions.compactor(live.config, conv, services.resolve_model, services.llm_for)
    work.recorder = TurnRecorder(history, conv, work.on_event)
    if work.checkpoint is not None:
        work.checkpoint.at = len(conv.messages)
    work.recorder.record(Message("user", blocks))


def loop_stage(work: TurnWork) -> AgentResult:
    """The agent loop, once more when a stop hook asks the model to go on."""
    assert work.conv is not None and work.ctx is not None and work.recorder is not None

    def once() -> AgentResult:
        assert work.llm is not None and work.tools is not None and work.conv is not None and work.ctx is not None
        assert work.recorder is not None
        live = work.live
        return run_turn(
            work.llm, work.tools, live.config, work.conv.messages, work.ctx, work.recorder, work.system,
            live.fitter, work.inputs.output, work.compactor,
        )  # fmt: skip

    def go_on(message: Message) -> None:
        assert work.recorder is not None
        work.recorder.record(message)
        work.on_event(MessageAppended(message))

    result = once()
    if work.hooks is not None and work.hooks.has("stop"):
        result = after_turn(work.hooks, result, go_on, once)
    result.usage = work.ctx.usage.total  # the turn's own calls (and summary calls) and its subagents'
    if result.context_usage is not None:
        work.conv.meta.context_usage = result.context_usage
    work.conv.meta.failed = False
    return result


def settle_stage(work: TurnWork) -> None:
    """Whatever the outcome: the session's spend and the conversation's cost, the log and the checkpoint closed."""
    assert work.ctx is not None and work.conv is not None and work.recorder is not None
    work.live.spent = work.ctx.spend.total
    if work.ctx.spend.turn:
        work.conv.meta.cost = work.live.spent
    work.recorder.close()
    if work.checkpoint is not None:
        work.checkpoint.finish()


def check_cost_budget(cfg: AgentConfig) -> None:
    """A dollar budget needs the model's price: without one the turn does not start."""
    if cfg.max_cost is not None and cfg.price is None:
        raise ConfigError(
            f"a cost budget (--max-cost / [budgets] max_cost) needs the price of "
            f'{cfg.provider_name}/{cfg.model}: add [prices."{cfg.provider_name}/{cfg.model}"] with '
            "input and output (US dollars per million tokens) to config.toml"
        )
