"""The project's own configuration: files a tool may change only with a person's say-so.

``.openheim/**`` (project settings, which pre-approve tool calls and hold hooks), ``.mcp.json`` (which starts
commands), ``.git/**`` (git hooks and config run commands) and ``.claude/**`` (hook scripts) decide what runs
later, outside the sandbox, so a model (or a remote client) that writes them could grant itself anything.
Writing them is never approved by a rule that allows every write, a mode, a hook or ``--approve all``: it
needs a person, or a user allow rule that names the path (its pattern spells the protected name and matches
it). Pure functions: the final decision (``core.final_decision``) and the serve file channel share them.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from openheim.config.rules import Rule, RuleSet, main_argument, pattern_matches, relative_path, tool_matches

WRITE_TOOLS = frozenset({"write_file", "edit_file"})
PROTECTED_DIRS = (".openheim", ".git", ".claude")
PROTECTED_FILES = frozenset({".mcp.json"})


def protected_name(relative: str | None) -> str | None:
    """The protected component of a root-relative POSIX path (``.openheim``, ``.git``, ``.claude`` or
    ``.mcp.json``), else None."""
    if not relative:
        return None
    parts = PurePosixPath(relative).parts
    found = next((name for name in PROTECTED_DIRS if name in parts), None)
    if found is not None:
        return found
    return parts[-1] if parts and parts[-1] in PROTECTED_FILES else None


def is_protected(path: str, root: str, cwd: str | None = None) -> bool:
    """Whether writing ``path`` (relative to ``cwd``, default the root; symlinks resolved) changes the
    project's own configuration under ``root``."""
    return protected_name(relative_path(path, root, cwd or root)) is not None


def protected_write(tool: str, args: object, root: str | None, cwd: str | None) -> str | None:
    """The root-relative path when this call of a file-writing tool changes protected configuration."""
    if tool not in WRITE_TOOLS:
        return None
    relative = main_argument(tool, args, root, cwd)
    return relative if protected_name(relative) is not None else None


def naming_rule(rules: RuleSet, tool: str, relative: str) -> Rule | None:
    """An allow rule that names this protected path: it is for ``tool``, has a pattern matching the path,
    and the pattern spells out the protected name (so ``write_file`` or ``write_file(**)`` do not count)."""
    name = protected_name(relative)
    for rule in rules.allow:
        if (
            name
            and rule.pattern is not None
            and name in rule.pattern
            and tool_matches(rule, tool)
            and pattern_matches(rule.pattern, relative, tool)
        ):
            return rule
    return None


_WHAT = {
    ".openheim": "the project's openheim configuration",
    ".mcp.json": "the project's openheim configuration",
    "": "part of the project's configuration that runs commands later",
}


def refusal(relative: str) -> str:
    """The tool result the model reads when a protected write was not approved by a person."""
    return (
        f"Permission denied: {relative} is {_WHAT.get(protected_name(relative) or '', _WHAT[''])}; changing it needs a "
        "person's approval (or a user allow rule naming the path), which no mode, rule or --approve all gives."
    )
