"""The hooks of a session's turn: the user's ``[[hooks]]`` plus those of the project files the user trusts,
and the prompt-side events (session_start, user_prompt, stop) around the agent loop."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openheim.config.project_hooks import load_project_hooks
from openheim.core.models import AgentResult, ContentBlock, Message, TextBlock
from openheim.errors import PromptBlocked

if TYPE_CHECKING:
    from collections.abc import Callable

    from openheim.config.schema import Config
    from openheim.core.cancel import CancelToken
    from openheim.core.hooks import HookRunner

GO_ON = "A stop hook asks you to go on before you finish: {reason}"


def turn_hooks(
    config: Config, data_dir: Path, session_id: str, root: Path, cwd: Path, secret_env_vars: frozenset[str]
) -> HookRunner | None:
    """The runner for one turn, or None when no hook is configured for it."""

    hooks = config.hooks + load_project_hooks(root, cwd, data_dir)
    if not hooks:
        return None
    from openheim.core.hooks import HookRunner  # loaded only when there is a hook to run

    return HookRunner(hooks, session_id, cwd, root, secret_env_vars)


def prompt_text(blocks: list[ContentBlock]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, TextBlock))


def before_prompt(
    runner: HookRunner, blocks: list[ContentBlock], first: bool, resumed: bool, cancel: CancelToken
) -> list[ContentBlock]:
    """Run session_start (on the session's first turn here) and user_prompt: the prompt's blocks with the
    context they add; PromptBlocked when a user_prompt hook refuses it (nothing is stored then)."""
    context: list[str] = []
    if first and runner.has("session_start"):
        added = runner.session_start("resume" if resumed else "startup", cancel)
        if added:
            context.append(added)
    if runner.has("user_prompt"):
        reason, added = runner.user_prompt(prompt_text(blocks), cancel)
        if reason is not None:
            raise PromptBlocked(f"{reason} (the prompt was not sent)")
        if added:
            context.append(added)
    if not context:
        return blocks
    return [*blocks, TextBlock("\n\n".join(context))]


def after_turn(
    runner: HookRunner, result: AgentResult, record: Callable[[Message], None], again: Callable[[], AgentResult]
) -> AgentResult:
    """Run the stop hooks. When one blocks the stop of a turn that ended with an answer, its reason goes to the
    model as a new message and the turn goes on once more (the hooks then see ``stop_hook_active`` true)."""
    reason = runner.stop(result.stop_reason.value, result.final_response)
    if reason is None:
        return result
    record(Message.user(GO_ON.format(reason=reason)))
    more = again()
    runner.stop(more.stop_reason.value, more.final_response, active=True)
    return AgentResult(
        more.final_response,
        result.iterations_used + more.iterations_used,
        more.stop_reason,
        result.usage + more.usage,
        more.context_usage,
        more.budget,
        more.structured,
        more.output_error,
        more.cost,
    )
