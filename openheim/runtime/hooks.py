"""The hooks of a session's turn: the user's ``[[hooks]]`` plus those of the project files the user trusts,
and the prompt-side events (session_start, user_prompt, stop) around the agent loop."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openheim.core.hooks import HookRunner
from openheim.core.models import ContentBlock, TextBlock
from openheim.errors import PromptBlocked

if TYPE_CHECKING:
    from openheim.config.schema import Config
    from openheim.core.cancel import CancelToken


def turn_hooks(config: Config, data_dir: Path, session_id: str, root: Path, cwd: Path,
               secret_env_vars: frozenset[str]) -> HookRunner | None:
    """The runner for one turn, or None when no hook is configured for it."""
    from openheim.config.project_hooks import load_project_hooks

    hooks = config.hooks + load_project_hooks(root, cwd, data_dir)
    if not hooks:
        return None
    return HookRunner(hooks, session_id, cwd, root, secret_env_vars)


def prompt_text(blocks: list[ContentBlock]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, TextBlock))


def before_prompt(runner: HookRunner, blocks: list[ContentBlock], first: bool, resumed: bool,
                  cancel: CancelToken) -> list[ContentBlock]:
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
