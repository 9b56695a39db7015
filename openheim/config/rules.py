"""Permission rules as data: parsing ``tool`` / ``tool(pattern)`` and deciding a tool call with them.

Pure functions only (no I/O). A rule names a tool (``read_file``; ``mcp__server__tool`` or
``server__tool``, the server named as configured or as exposed; ``*`` is a wildcard in the name)
and optionally a pattern on the call's main argument (``MAIN_ARGUMENTS``).
Deny wins over allow; a call no rule allows falls through to the front end's fallback (``--approve``).
Shell commands are split into simple commands (``config.shell_split``): an allow covers the command only if
it covers every part as written (a ``VAR=x``, ``env``, ``nohup``, ``sh -c`` or ``git -c`` the pattern does not
spell leaves the part uncovered); a deny matches if it matches any part seen through such wrappers. This
decides when to ask; the kernel sandbox is the boundary (docs/security.md).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

from openheim.config.shell_split import ShellPart, spells, split_command
from openheim.config.shell_split import shell_words as shell_words  # re-exported: it was defined here

SHELL_TOOL = "execute_command"
PATH_TOOLS = frozenset({"read_file", "write_file", "edit_file", "list_dir", "search"})
# The argument a rule's pattern is matched against, per built-in tool; other tools (MCP, custom) are
# matched on their arguments as compact JSON with sorted keys.
MAIN_ARGUMENTS = {
    "read_file": "path",
    "write_file": "path",
    "edit_file": "path",
    "list_dir": "path",
    "search": "path",
    "execute_command": "command",
    "web_fetch": "url",
    "remember": "content",
    "search_memory": "query",
    "edit_memory": "id",
    "forget": "id",
    "delegate_task": "agent",
}
_DEFAULT_PATH = {"list_dir": ".", "search": "."}
_NAME = r"^(mcp:)?[A-Za-z0-9_*-]+$"  # patterns compile on first use (re caches them)


class RuleError(ValueError):
    """A malformed rule; the message names it."""


@dataclass(frozen=True)
class Rule:
    """One permission rule: a tool name (may hold ``*``) and an optional pattern."""

    text: str  # as written
    tool: str  # the registry name (see exposed_tool_name); may hold ``*``
    pattern: str | None
    source: str = ""  # where it was written: a file path, --allow, --deny, builder

    def __str__(self) -> str:
        return self.text


def parse_rule(text: object, source: str = "") -> Rule:
    """``tool`` or ``tool(pattern)``; RuleError saying what is wrong otherwise."""
    if not isinstance(text, str):
        raise RuleError(f"permission rule {text!r} must be a string like read_file or write_file(src/**)")
    raw = text.strip()
    name, pattern = raw, None
    if "(" in raw:
        if not raw.endswith(")"):
            raise RuleError(f"permission rule '{text}' must end with ')' (form: tool or tool(pattern))")
        name, pattern = raw[: raw.index("(")], raw[raw.index("(") + 1 : -1]
        if not pattern.strip():
            raise RuleError(f"permission rule '{text}' has an empty pattern; write just '{name}' for every call")
    if not re.match(_NAME, name):
        raise RuleError(
            f"permission rule '{text}' does not start with a tool name (letters, digits, _ - *; "
            "MCP tools as mcp__server__tool)"
        )
    return Rule(raw, exposed_tool_name(name), pattern, source)


# The server part of an exposed MCP tool name keeps [A-Za-z0-9_] and the tool part [A-Za-z0-9_-], as
# openheim.mcp.naming writes them; ``*`` stays a wildcard.
_SERVER_UNSAFE = r"[^A-Za-z0-9_*]"
_TOOL_UNSAFE = r"[^A-Za-z0-9_*-]"


def exposed_tool_name(name: str) -> str:
    """A tool name as a user may write it, as the model sees it: ``mcp:server__tool``, ``mcp__server__tool``
    and ``server__tool`` with the server named as configured (``everything-http__echo``) all become
    ``everything_http__echo``; built-in names are unchanged."""
    name = name.removeprefix("mcp:")
    if name.startswith("mcp__") and "__" in name[5:]:
        name = name[5:]
    if "__" not in name:
        return name
    server, tool = name.split("__", 1)
    server, tool = re.sub(_SERVER_UNSAFE, "_", server), re.sub(_TOOL_UNSAFE, "_", tool)
    return f"_{server}__{tool}" if server[:1].isdigit() else f"{server}__{tool}"


@dataclass(frozen=True)
class RuleSet:
    """Allow and deny rules; deny wins."""

    allow: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.allow or self.deny)

    def __add__(self, other: RuleSet) -> RuleSet:
        return RuleSet(self.allow + other.allow, self.deny + other.deny)


NO_RULES = RuleSet()


def parse_rules(allow: list | tuple, deny: list | tuple, source: str = "") -> RuleSet:
    return RuleSet(tuple(parse_rule(r, source) for r in allow), tuple(parse_rule(r, source) for r in deny))


# --- matching ----------------------------------------------------------------


@lru_cache(maxsize=512)
def _compiled(pattern: str, paths: bool) -> re.Pattern[str]:
    """``*`` any run of characters (for paths: within one directory; ``**`` across directories,
    ``**/`` also none); ``\\`` makes the next character literal; everything else is literal. A command
    pattern ending in `` *`` also matches the command with no arguments."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif pattern.startswith("**/", i) and paths:
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*" if paths else ".*")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    body = "".join(out)
    if not paths and pattern.endswith(" *") and not pattern.endswith("\\ *") and body.endswith("\\ .*"):
        body = body[: -len(re.escape(" ") + ".*")] + "(?: .*)?"
    return re.compile(body + r"\Z", re.DOTALL)


def tool_matches(rule: Rule, tool: str) -> bool:
    return _compiled(rule.tool, False).match(tool) is not None


def pattern_matches(pattern: str, subject: str, tool: str) -> bool:
    return _compiled(pattern, tool in PATH_TOOLS).match(subject) is not None


def main_argument(tool: str, args: object, root: str | None = None, cwd: str | None = None) -> str | None:
    """What a pattern on ``tool`` is matched against; None when the call has none a pattern can match
    (missing, not text, or a path outside ``root``). Paths become relative to ``root`` (POSIX, normalised)."""
    if not isinstance(args, dict):
        return None
    key = MAIN_ARGUMENTS.get(tool)
    if key is None:
        return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    value = args.get(key, _DEFAULT_PATH.get(tool))
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        return _DEFAULT_PATH.get(tool) if value is None else None
    if tool in PATH_TOOLS:
        return relative_path(value, root, cwd)
    return value.strip() if tool in ("web_fetch", SHELL_TOOL) else value


def relative_path(path: str, root: str | None, cwd: str | None) -> str | None:
    """``path`` (relative to ``cwd``) relative to ``root``, normalised with symlinks resolved (so a link is
    judged by where it leads); ``.`` for the root; None outside it or when it holds a NUL byte."""
    if "\0" in path or "\0" in (root or "") or "\0" in (cwd or ""):
        return None  # no file has such a name (the tools refuse it with their own message)
    root = os.path.realpath(root or cwd or "/")
    base = os.path.realpath(cwd) if cwd else root
    full = os.path.realpath(os.path.join(base, os.path.expanduser(path)))  # a symlink is judged by its target
    rel = os.path.relpath(full, root)
    if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/")


def literal(text: str) -> str:
    """``text`` as a pattern that matches only itself."""
    return text.replace("\\", "\\\\").replace("*", "\\*")


def suggested_rules(tool: str, args: object, root: str | None = None, cwd: str | None = None) -> list[str]:
    """The allow rules that cover exactly this call, for "allow always" saved in a project: the exact path,
    URL or command line (one rule per part of a compound command), or the tool for tools without a main
    argument. Empty when nothing exact can be said (a path outside the root, an unparseable command)."""
    name = f"mcp:{tool}" if "__" in tool else tool
    if tool not in MAIN_ARGUMENTS or tool in ("remember", "search_memory", "edit_memory", "forget"):
        return [name]
    parts = _subjects(tool, args, root, cwd)
    if not parts:
        return []
    return list(dict.fromkeys(f"{name}({literal(p.allow_form)})" for p in parts))


# --- deciding ----------------------------------------------------------------

ALLOW, DENY, PROJECT_ALLOW, FALL_THROUGH = "allow", "deny", "project_allow", "fall_through"


@dataclass(frozen=True)
class Verdict:
    """What the rules say about one call: ``outcome`` (allow, deny, project_allow, fall_through),
    the rule that decided (None when none did) and why, in words."""

    outcome: str
    rule: Rule | None = None
    reason: str = ""
    parts: tuple[str, ...] = field(default=())


def _subjects(tool: str, args: object, root: str | None, cwd: str | None) -> list[ShellPart] | None:
    """What the patterns must cover: one subject, or a shell line's parts; None: nothing a pattern matches."""
    subject = main_argument(tool, args, root, cwd)
    if subject is None:
        return None
    if tool == SHELL_TOOL:
        return split_command(subject)
    return [ShellPart(subject)]


def _covers(rule: Rule, tool: str, part: ShellPart | None) -> bool:
    """Whether an allow rule covers one subject (a command with a redirection only when the pattern has one)."""
    if not tool_matches(rule, tool):
        return False
    if rule.pattern is None:
        return True
    if part is None:
        return False
    if part.redirects and not any(c in rule.pattern for c in "<>"):
        return False
    if not all(spells(rule.pattern, word) for word in part.risky):
        return False
    return pattern_matches(rule.pattern, part.allow_form, tool)


def _denied_by(rule: Rule, tool: str, parts: list[ShellPart] | None, whole: str | None) -> str | None:
    """The subject a deny rule matches (``""`` for a rule on the whole tool), or None."""
    if not tool_matches(rule, tool):
        return None
    if rule.pattern is None:
        return ""
    candidates = [form for p in parts or () for form in (p.text, p.raw, *p.also)]
    candidates += [whole] if whole is not None else []
    return next((s for s in candidates if pattern_matches(rule.pattern, s, tool)), None)


def read_denied(rules: RuleSet, relative: str) -> Rule | None:
    """The deny rule with a path pattern that forbids reading ``relative`` (root-relative) with read_file:
    tools returning file content some other way (search) honour it too. A rule on every read_file call
    (no pattern) is not a path deny and is left to the gate."""
    return next(
        (
            r
            for r in rules.deny
            if r.pattern is not None
            and tool_matches(r, "read_file")
            and pattern_matches(r.pattern, relative, "read_file")
        ),
        None,
    )


def decide(
    tool: str, args: object, user: RuleSet, project: RuleSet = NO_RULES, root: str | None = None, cwd: str | None = None
) -> Verdict:
    """Deny (user's or project's) wins; then the user's allows; then the project's allows (with the
    user's, every part covered: ``project_allow``); else ``fall_through`` to the front end's fallback."""
    parts = _subjects(tool, args, root, cwd)
    whole = main_argument(tool, args, root, cwd)
    shown = tuple(p.text for p in parts or ())
    for rule in (*user.deny, *project.deny):
        hit = _denied_by(rule, tool, parts, whole)
        if hit is not None:
            why = f"deny rule '{rule}' ({rule.source}) matches " + (f"'{hit}'" if hit else f"every {tool} call")
            return Verdict(DENY, rule, why, shown)
    if tool == SHELL_TOOL and parts is None and whole is not None:
        return Verdict(
            FALL_THROUGH,
            None,
            "the command cannot be parsed (unbalanced quotes, or a newline inside quotes), so no rule allows it",
            shown,
        )
    verdict = _allowed(tool, parts, user.allow, ALLOW)
    if verdict.outcome == ALLOW:
        return verdict
    if project.allow:
        both = _allowed(tool, parts, user.allow + project.allow, PROJECT_ALLOW)
        if both.outcome == PROJECT_ALLOW:
            return both
    return Verdict(FALL_THROUGH, None, verdict.reason, shown)


def _allowed(tool: str, parts: list[ShellPart] | None, rules: tuple[Rule, ...], outcome: str) -> Verdict:
    shown = tuple(p.allow_form for p in parts or ())
    applicable = [r for r in rules if tool_matches(r, tool)]
    if not applicable:
        return Verdict(FALL_THROUGH, None, f"no allow rule names {tool}", shown)
    bare = next((r for r in applicable if r.pattern is None), None)
    if bare is not None:
        return Verdict(outcome, bare, f"allow rule '{bare}' ({bare.source}) covers every {tool} call", shown)
    if not parts:
        return Verdict(
            FALL_THROUGH,
            None,
            f"the call has no {MAIN_ARGUMENTS.get(tool, 'argument')} an allow pattern can match",
            shown,
        )
    deciding: Rule | None = None
    for part in parts:
        rule = next((r for r in applicable if _covers(r, tool, part)), None)
        if rule is None:
            return Verdict(FALL_THROUGH, None, _uncovered(part, len(parts) > 1), shown)
        deciding = deciding or rule
    assert deciding is not None
    what = f"covers every part of '{' ; '.join(shown)}'" if len(parts) > 1 else f"matches '{shown[0]}'"
    return Verdict(outcome, deciding, f"allow rule '{deciding}' ({deciding.source}) {what}", shown)


def _uncovered(part: ShellPart, compound: bool) -> str:
    """Why no allow rule covers ``part``, in words."""
    what = f"part '{part.allow_form}' of the command" if compound else f"'{part.allow_form}'"
    if part.redirects:
        return f"{what} matches no allow rule (it redirects input or output)"
    if part.risky:
        return (
            f"{what} matches no allow rule (an allow rule must spell {', '.join(part.risky)} itself: they change "
            "what runs)"
        )
    return f"{what} matches no allow rule"


def unmatched_rules(rules: RuleSet, offered: list[str]) -> list[Rule]:
    """The rules whose tool name matches none of ``offered`` nor any built-in tool (a typo, or an MCP
    tool named in a way openheim does not expose)."""
    known = [*offered, *MAIN_ARGUMENTS]
    return [rule for rule in (*rules.allow, *rules.deny) if not any(tool_matches(rule, name) for name in known)]


def rule_names(rule: Rule, tool: str, args: object, root: str | None = None, cwd: str | None = None) -> bool:
    """Whether ``rule`` names this call the way a deny rule would: its tool, and (with a pattern) the call's
    main argument or any part of a compound shell command. Hooks' matchers use it."""
    return _denied_by(rule, tool, _subjects(tool, args, root, cwd), main_argument(tool, args, root, cwd)) is not None
