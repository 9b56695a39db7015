"""Hooks as data: ``[[hooks]]`` entries parsed and matched against a tool call (no I/O).

A hook is the user's own command, run at a fixed point of a session: ``session_start``, ``user_prompt``,
``pre_tool``, ``post_tool`` or ``stop``. ``matcher`` (tool events only) is a permission rule
(``execute_command(git push *)``, ``write_file``, ``mcp:*``): the hook runs for the calls it names.
"""

from __future__ import annotations

from dataclasses import dataclass

from openheim.config.rules import Rule, RuleError, parse_rule, rule_names
from openheim.errors import ConfigError

EVENTS = ("session_start", "user_prompt", "pre_tool", "post_tool", "stop")
TOOL_EVENTS = ("pre_tool", "post_tool")
# The event names a hook reads in ``hook_event_name``: the widely used names, so existing scripts port.
EVENT_NAMES = {
    "session_start": "SessionStart",
    "user_prompt": "UserPromptSubmit",
    "pre_tool": "PreToolUse",
    "post_tool": "PostToolUse",
    "stop": "Stop",
}
DEFAULT_TIMEOUT = 30.0
ALLOW, DENY, ASK = "allow", "deny", "ask"  # what a pre_tool hook may decide
_KEYS = {"event", "matcher", "command", "timeout_secs"}


@dataclass
class HookSpec:
    """One ``[[hooks]]`` entry; ``source`` is the file it came from."""

    event: str
    command: str
    matcher: Rule | None = None
    timeout_secs: float = DEFAULT_TIMEOUT
    source: str = ""

    def describe(self) -> str:
        on = f" {self.matcher}" if self.matcher is not None else ""
        return f"{self.event}{on} hook `{self.command}` ({self.source})"


def parse_hook(d: object, where: str, source: str) -> HookSpec:
    """One entry; ConfigError naming ``where`` (e.g. ``hooks[2]``) otherwise."""
    if not isinstance(d, dict):
        raise ConfigError(f"{where} must be a table ([[hooks]] with event and command)")
    unknown = sorted(set(d) - _KEYS)
    if unknown:
        raise ConfigError(f"{where} has an unknown key '{unknown[0]}' (known: {', '.join(sorted(_KEYS))})")
    event, command = d.get("event"), d.get("command")
    if event not in EVENTS:
        raise ConfigError(f"{where}.event must be one of {', '.join(EVENTS)}, got {event!r}")
    if not isinstance(command, str) or not command.strip():
        raise ConfigError(f"{where}.command must be the command to run (a non-empty string)")
    timeout = d.get("timeout_secs", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ConfigError(f"{where}.timeout_secs must be a positive number of seconds, got {timeout!r}")
    matcher = None
    if d.get("matcher") is not None:
        if event not in TOOL_EVENTS:
            raise ConfigError(f"{where}.matcher applies only to pre_tool and post_tool hooks; remove it")
        try:
            matcher = parse_rule(d["matcher"], source)
        except RuleError as e:
            raise ConfigError(f"{where}.matcher: {e}") from None
    return HookSpec(str(event), command, matcher, float(timeout), source)


def parse_hooks(value: object, source: str) -> tuple[HookSpec, ...]:
    """The ``hooks`` array of tables."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError("'hooks' must be an array of tables ([[hooks]])")
    return tuple(parse_hook(d, f"hooks[{i}]", source) for i, d in enumerate(value))


def hook_matches(hook: HookSpec, tool: str, args: object, root: str | None = None, cwd: str | None = None) -> bool:
    """Whether a tool hook runs for this call: no matcher, or a matcher that names it (like a deny rule:
    a pattern matches if it matches any part of a compound shell command)."""
    return hook.matcher is None or rule_names(hook.matcher, tool, args, root, cwd)


def hooks_for(
    hooks: tuple[HookSpec, ...],
    event: str,
    tool: str | None = None,
    args: object = None,
    root: str | None = None,
    cwd: str | None = None,
) -> list[HookSpec]:
    """The hooks that run for ``event`` (and, for tool events, this call), in configured order."""
    return [h for h in hooks if h.event == event and (tool is None or hook_matches(h, tool, args, root, cwd))]
