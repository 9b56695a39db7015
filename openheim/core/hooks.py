"""Running the user's hooks: one JSON object on stdin, an answer by exit code and optional JSON on stdout.

The conventions are the widely used ones (docs/hooks.md has the mapping): ``hook_event_name``,
``session_id``, ``cwd``, ``tool_name``, ``tool_input``, ``tool_response``, ``prompt`` in; exit 0 with
optional JSON (``decision``, ``reason``, ``hookSpecificOutput.permissionDecision`` / ``updatedInput`` /
``additionalContext``) or exit 2 with the reason on stderr out. A hook that fails (another exit code,
a crash, a timeout) is one warning line and decides nothing, except that a failed ``pre_tool`` hook
refuses the call (fail closed). Hooks run as the user, outside the sandbox, without the provider keys, in a
fresh empty directory (``OPENHEIM_PROJECT_DIR`` names the project) with ``PYTHONSAFEPATH=1``.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openheim.config.hooks import ALLOW, ASK, DENY, EVENT_NAMES, HookSpec, hooks_for
from openheim.config.named_files import first_changed
from openheim.core.child_env import child_environ
from openheim.core.hook_process import run_command

if TYPE_CHECKING:
    from openheim.core.cancel import CancelToken
    from openheim.core.models import ToolUseBlock

log = logging.getLogger(__name__)

OUTPUT_CAP = 64 * 1024  # bytes of a hook's stdout or stderr that are read into an answer


@dataclass(frozen=True)
class HookAnswer:
    """What one hook said: ``failed`` (with why), ``blocked`` (exit 2 or a block/deny decision) and its parts."""

    failed: str | None = None
    blocked: bool = False
    reason: str = ""
    decision: str | None = None  # pre_tool: allow | deny | ask
    context: str = ""  # additionalContext (or plain stdout where that adds context)
    updated_input: dict | None = None  # pre_tool: the arguments the call runs with instead


@dataclass(frozen=True)
class PreToolAnswer:
    """The pre_tool hooks' verdict on one call: ``decision`` (None: they did not decide), ``reason`` (the
    model reads it when denied), and ``arguments`` (JSON text) when a hook rewrote them."""

    decision: str | None = None
    reason: str = ""
    arguments: str | None = None
    hook: str = ""  # which hook decided, for messages


def parse_answer(code: int, stdout: str, stderr: str, plain_is_context: bool) -> HookAnswer:
    """A hook's exit code and output as a HookAnswer (pure)."""
    if code == 2:
        return HookAnswer(blocked=True, reason=stderr.strip() or "blocked by a hook")
    if code != 0:
        detail = " ".join(stderr.split())[:200]
        return HookAnswer(failed=f"exited with {code}" + (f": {detail}" if detail else ""))
    text = stdout.strip()
    if not text.startswith("{"):
        return HookAnswer(context=text if plain_is_context else "")
    try:
        data = json.loads(text)
    except ValueError:
        return HookAnswer(failed="printed output that starts like JSON but is not valid JSON")
    if not isinstance(data, dict):
        return HookAnswer()
    return _from_json(data)


def _from_json(data: dict) -> HookAnswer:
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    decision = specific.get("permissionDecision")
    legacy = data.get("decision")  # "block" everywhere; "approve" for tool calls
    if decision not in (ALLOW, DENY, ASK):
        decision = {"approve": ALLOW, "block": DENY}.get(legacy) if isinstance(legacy, str) else None
    reason = specific.get("permissionDecisionReason") or data.get("reason") or ""
    updated = specific.get("updatedInput")
    context = specific.get("additionalContext")
    blocked = legacy == "block" or decision == DENY
    return HookAnswer(
        blocked=blocked,
        reason=str(reason),
        decision=decision,
        context=context if isinstance(context, str) else "",
        updated_input=updated if isinstance(updated, dict) else None,
    )


def _text(data: bytes) -> str:
    return data[:OUTPUT_CAP].decode("utf-8", "replace")


def run_hook(
    hook: HookSpec, payload: dict, cwd: Path, env: dict[str, str], cancel: CancelToken | None = None
) -> tuple[int, str, str] | str:
    """Run one hook's command with ``payload`` on stdin, in ``cwd``: (exit code, stdout, stderr), or why it
    failed. A file its trusted project file runs that changed since (``hook.pinned``) stops it first."""
    changed = first_changed(hook.pinned)
    if changed is not None:
        return (
            f"did not run: {changed} changed since you trusted {hook.source}; "
            f"run `openheim permissions trust {hook.source}` if the change is yours"
        )
    stdin = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    stopped = (lambda: cancel.cancelled) if cancel is not None else (lambda: False)
    ran = run_command(["/bin/sh", "-c", hook.command], stdin, cwd, env, hook.timeout_secs, OUTPUT_CAP, stopped)
    if ran == "timeout":
        return f"timed out after {hook.timeout_secs:g}s"
    if ran == "cancelled" or (cancel is not None and cancel.cancelled):
        return "stopped: the turn was cancelled"
    if isinstance(ran, str):
        return ran
    code, out, err = ran
    return code, _text(out), _text(err)


@dataclass(eq=False)
class HookRunner:
    """The hooks of one session's turn, with what every payload shares."""

    hooks: tuple[HookSpec, ...]
    session_id: str
    cwd: Path
    root: Path
    secret_env_vars: frozenset[str] = frozenset()
    warn: Callable[[str], None] = field(default=lambda line: log.warning("%s", line))

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def has(self, event: str) -> bool:
        return any(h.event == event for h in self.hooks)

    def _env(self) -> dict[str, str]:
        env = child_environ(secrets=self.secret_env_vars)
        env.update(
            OPENHEIM_PROJECT_DIR=str(self.root),
            CLAUDE_PROJECT_DIR=str(self.root),
            OPENHEIM_SESSION_ID=self.session_id,
            PYTHONSAFEPATH="1",  # python -m / a script's directory: never a module planted in the workspace
        )
        return env

    def _ask(self, hook: HookSpec, event: str, extra: dict[str, Any], cancel: CancelToken | None) -> HookAnswer:
        payload = {
            "hook_event_name": EVENT_NAMES[event],
            "session_id": self.session_id,
            "cwd": str(self.cwd),
            "openheim_event": event,
            **extra,
        }
        where = Path(tempfile.mkdtemp(prefix="openheim-hook-"))  # a directory the model cannot write
        try:
            ran = run_hook(hook, payload, where, self._env(), cancel)
        finally:
            shutil.rmtree(where, ignore_errors=True)
        if isinstance(ran, str):
            answer = HookAnswer(failed=ran)
        else:
            answer = parse_answer(*ran, plain_is_context=event in ("user_prompt", "session_start"))
        if answer.failed:
            outcome = "the call is refused" if event == "pre_tool" else "it decides nothing"
            self.warn(f"hook failed: {hook.describe()} {answer.failed}; {outcome}")
        return answer

    def session_start(self, source: str, cancel: CancelToken | None = None) -> str:
        """Run the session_start hooks; the context they add (joined), for the model."""
        answers = [
            self._ask(h, "session_start", {"source": source}, cancel) for h in hooks_for(self.hooks, "session_start")
        ]
        return "\n\n".join(a.context for a in answers if a.context and not a.failed)

    def user_prompt(self, prompt: str, cancel: CancelToken | None = None) -> tuple[str | None, str]:
        """Run the user_prompt hooks: (why the prompt is blocked, or None; the context they add)."""
        context: list[str] = []
        for hook in hooks_for(self.hooks, "user_prompt"):
            answer = self._ask(hook, "user_prompt", {"prompt": prompt}, cancel)
            if answer.failed:
                continue
            if answer.blocked:
                return answer.reason or f"blocked by {hook.describe()}", ""
            if answer.context:
                context.append(answer.context)
        return None, "\n\n".join(context)

    def pre_tool(self, call: ToolUseBlock, args: dict, cancel: CancelToken | None = None) -> PreToolAnswer:
        """Run the pre_tool hooks that match the call, in order, each seeing the arguments as rewritten so
        far: the first deny (or failure) wins, then ask, then allow."""
        decision: str | None = None
        reason, decider = "", ""
        rewritten: dict | None = None
        for hook in hooks_for(self.hooks, "pre_tool", call.name, args, str(self.root), str(self.cwd)):
            answer = self._ask(
                hook,
                "pre_tool",
                {"tool_name": call.name, "tool_input": rewritten or args, "tool_use_id": call.id},
                cancel,
            )
            if answer.failed:
                return PreToolAnswer(
                    DENY,
                    f"Refused: the pre_tool hook `{hook.command}` failed "
                    f"({answer.failed}), and a failed pre_tool hook refuses the call.",
                    hook=hook.describe(),
                )
            if answer.blocked:
                why = answer.reason or "no reason given"
                return PreToolAnswer(DENY, f"Blocked by hook: {why}", hook=hook.describe())
            if answer.updated_input is not None:
                rewritten = answer.updated_input
            if answer.decision == ASK or (answer.decision == ALLOW and decision is None):
                decision, reason, decider = answer.decision, answer.reason, hook.describe()
        arguments = json.dumps(rewritten, ensure_ascii=False) if rewritten is not None else None
        return PreToolAnswer(decision, reason, arguments, decider)

    def post_tool(
        self, call: ToolUseBlock, args: dict, result: str, is_error: bool, cancel: CancelToken | None = None
    ) -> str:
        """Run the post_tool hooks that match the call; the notes they add to its result (fail open)."""
        notes: list[str] = []
        for hook in hooks_for(self.hooks, "post_tool", call.name, args, str(self.root), str(self.cwd)):
            answer = self._ask(
                hook,
                "post_tool",
                {
                    "tool_name": call.name,
                    "tool_input": args,
                    "tool_use_id": call.id,
                    "tool_response": {"content": result, "is_error": is_error},
                },
                cancel,
            )
            note = answer.reason if answer.blocked else answer.context
            if note and not answer.failed:
                notes.append(note.strip())
        return "\n".join(notes)

    def stop(self, stop_reason: str, final_text: str | None, active: bool = False) -> str | None:
        """Run the stop hooks. When the turn ended with an answer and ``active`` is False (no hook has made it go
        on yet), the first that blocks (exit 2, or ``decision: "block"``) returns its reason: the model goes on
        with it. Otherwise they only observe (None)."""
        reason: str | None = None
        for hook in hooks_for(self.hooks, "stop"):
            answer = self._ask(
                hook,
                "stop",
                {"stop_reason": stop_reason, "stop_hook_active": active, "last_assistant_message": final_text or ""},
                None,
            )
            if reason is None and answer.blocked and not answer.failed and not active and stop_reason == "end_turn":
                reason = answer.reason or f"{hook.describe()} asked to go on"
        return reason
