"""Permission rules as data: parsing ``tool`` / ``tool(pattern)`` and deciding a tool call with them.

Pure functions only (no I/O). A rule names a tool (``read_file``; ``mcp__server__tool`` or
``server__tool``, the server named as configured or as exposed; ``*`` is a wildcard in the name)
and optionally a pattern on the call's main argument (``MAIN_ARGUMENTS``).
Deny wins over allow; a call no rule allows falls through to the front end's fallback (``--approve``).
Shell commands are split on ``;``, ``&``, ``|``, newlines, ``(``/``)``, backticks and ``$(`` (``#`` comments
dropped), each part matched with quotes removed and ``env``/``VAR=x`` prefixes dropped: an allow covers the
command only if it covers every part, a deny matches if it matches any part (also ``/bin/rm`` as ``rm`` and
the command inside ``sh -c``, ``eval`` and ``xargs``). This decides when to ask; the kernel sandbox is the
boundary (docs/security.md).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache

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


# --- shell splitting ----------------------------------------------------------


@dataclass
class ShellPart:
    """One simple command of a compound shell command, as rules see it: quotes and backslashes removed,
    blanks collapsed to one space, ``env``/``command``/``exec``/``nohup``/``VAR=x`` prefixes dropped."""

    text: str
    redirects: bool = False  # an unquoted > or < (writes or reads a file the rule may not name)
    raw: str = ""  # as written
    also: tuple[str, ...] = ()  # what a deny rule also checks: /bin/rm as rm; the command of sh -c, eval, xargs


_COMMENT_AFTER = " \t\n;&|()`"
_BLANKS = " \t\r\f\v\n"
_PREFIXES = frozenset({"env", "command", "builtin", "exec", "nohup", "nice", "time", "stdbuf", "setsid"})
_WRAPPERS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "busybox"})
_ASSIGNMENT = r"[A-Za-z_][A-Za-z0-9_]*="


def split_command(line: str) -> list[ShellPart] | None:
    """The simple commands of a shell line, quote-aware; None when it cannot be parsed (unbalanced quotes, or
    a newline inside quotes, which no allow rule may cover).

    Separators: ``;`` ``&`` ``|`` newline ``(`` ``)`` outside quotes, and backticks and ``$(`` also inside
    double quotes (their contents run as commands). ``>&``, ``<&`` and ``&>`` are redirections, not ``&``.
    An unquoted ``#`` at the start of a word starts a comment that runs to the end of the line.
    """
    parts: list[ShellPart] = []
    current: list[str] = []
    redirects = False
    quote = ""  # "", "'" or '"'
    nested: list[tuple[str, str]] = []  # open substitutions: ("`" or "$(", the quote they were opened in)
    i, n = 0, len(line)

    def cut() -> None:
        nonlocal redirects
        raw = "".join(current).strip(_BLANKS)
        if raw:
            parts.append(_part(raw, redirects))
        current.clear()
        redirects = False

    while i < n:
        c = line[i]
        if quote and c == "\n":
            return None
        if quote == "'":
            current.append(c)
            quote = "" if c == "'" else quote
        elif c == "\\" and i + 1 < n:
            current.append(line[i : i + 2])
            i += 1
        elif c == "`" and nested and nested[-1][0] == "`" and quote == "":
            cut()
            quote = nested.pop()[1]
        elif c == "`" or (c == "$" and line[i + 1 : i + 2] == "("):
            cut()
            nested.append((c if c == "`" else "$(", quote))
            quote = ""
            i += 1 if c == "$" else 0
        elif c == ")" and quote == "" and nested and nested[-1][0] == "$(":
            cut()
            quote = nested.pop()[1]
        elif quote == '"':
            current.append(c)
            quote = "" if c == '"' else quote
        elif c in "'\"":
            current.append(c)
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in _COMMENT_AFTER):
            while i + 1 < n and line[i + 1] != "\n":
                i += 1
        elif c == "&" and (line[i - 1 : i] in ("<", ">") or line[i + 1 : i + 2] == ">"):
            current.append(c)
            redirects = redirects or line[i + 1 : i + 2] == ">"
        elif c in ";&|\n()":
            cut()
        else:
            if c in "<>":
                redirects = True
            current.append(c)
        i += 1
    if quote or nested or line.rstrip().endswith("\\"):
        return None
    cut()
    return parts


def shell_words(text: str) -> list[str]:
    """``text`` split into words as the shell would: blanks separate, quotes and backslashes are removed (an
    unclosed quote runs to the end)."""
    words: list[str] = []
    word: list[str] = []
    started, quote, i = False, "", 0
    while i < len(text):
        c = text[i]
        if quote == "'":
            if c == "'":
                quote = ""
            else:
                word.append(c)
        elif quote == '"':
            if c == '"':
                quote = ""
            elif c == "\\" and text[i + 1 : i + 2] in ('"', "\\", "$", "`"):
                word.append(text[i + 1])
                i += 1
            else:
                word.append(c)
        elif c in "'\"":
            quote, started = c, True
        elif c == "\\" and i + 1 < len(text):
            word.append(text[i + 1])
            started = True
            i += 1
        elif c in _BLANKS:
            if started or word:
                words.append("".join(word))
            word, started = [], False
        else:
            word.append(c)
        i += 1
    if started or word:
        words.append("".join(word))
    return words


def _drop_prefixes(words: list[str]) -> list[str]:
    """``FOO=1 env -i command nohup rm x`` -> ``rm x`` (a line of assignments only stays as it is)."""
    i = 0
    while i < len(words):
        word = words[i]
        if re.match(_ASSIGNMENT, word):
            i += 1
        elif word in _PREFIXES:
            i += 1
            while i < len(words) and words[i].startswith("-") and words[i] != "-":
                takes_value = words[i] in ("-u", "-C", "-S", "-n", "-i0", "-o", "-e") and i + 1 < len(words)
                i += 2 if takes_value and words[i] != "-i0" else 1
        else:
            break
    return words[i:] if i < len(words) else words


def _inner_commands(words: list[str]) -> tuple[str, ...]:
    """What a deny rule must also see: the command word without its directory, and the command run by
    ``sh -c X``, ``eval X`` and ``xargs [opts] X``."""
    if not words:
        return ()
    out: list[str] = []
    base = words[0].rsplit("/", 1)[-1]
    if base != words[0]:
        out.append(" ".join([base, *words[1:]]))
    if base in _WRAPPERS and "-c" in words[1:]:
        at = words.index("-c")
        if at + 1 < len(words):
            for part in split_command(words[at + 1]) or [ShellPart(words[at + 1])]:
                out += [part.text, *part.also]
    elif base == "eval" and len(words) > 1:
        for part in split_command(" ".join(words[1:])) or []:
            out += [part.text, *part.also]
    elif base == "xargs":
        rest = [w for w in words[1:] if not w.startswith("-")]
        if rest:
            out.append(" ".join(_drop_prefixes(rest)))
    return tuple(dict.fromkeys(out))


def _part(raw: str, redirects: bool) -> ShellPart:
    words = _drop_prefixes(shell_words(raw))
    return ShellPart(" ".join(words) or raw, redirects, raw, _inner_commands(words))


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
    return list(dict.fromkeys(f"{name}({literal(p.text)})" for p in parts))


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
    return pattern_matches(rule.pattern, part.text, tool)


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
    shown = tuple(p.text for p in parts or ())
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
            what = f"part '{part.text}' of the command" if len(parts) > 1 else f"'{part.text}'"
            extra = " (it redirects input or output)" if part.redirects else ""
            return Verdict(FALL_THROUGH, None, f"{what} matches no allow rule{extra}", shown)
        deciding = deciding or rule
    assert deciding is not None
    what = f"covers every part of '{' ; '.join(shown)}'" if len(parts) > 1 else f"matches '{shown[0]}'"
    return Verdict(outcome, deciding, f"allow rule '{deciding}' ({deciding.source}) {what}", shown)


def unmatched_rules(rules: RuleSet, offered: list[str]) -> list[Rule]:
    """The rules whose tool name matches none of ``offered`` nor any built-in tool (a typo, or an MCP
    tool named in a way openheim does not expose)."""
    known = [*offered, *MAIN_ARGUMENTS]
    return [rule for rule in (*rules.allow, *rules.deny) if not any(tool_matches(rule, name) for name in known)]


def rule_names(rule: Rule, tool: str, args: object, root: str | None = None, cwd: str | None = None) -> bool:
    """Whether ``rule`` names this call the way a deny rule would: its tool, and (with a pattern) the call's
    main argument or any part of a compound shell command. Hooks' matchers use it."""
    return _denied_by(rule, tool, _subjects(tool, args, root, cwd), main_argument(tool, args, root, cwd)) is not None
