"""gitignore-style rules for the search tool: parse .gitignore/.ignore files and match paths (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One ignore-file line as a regex."""

    regex: re.Pattern
    negated: bool
    dir_only: bool
    name_regex: re.Pattern | None = None  # set when the rule can only match a path's last component


def _class_to_regex(glob: str, i: int) -> tuple[str, int]:
    """Translate a ``[...]`` class starting at glob[i]; returns (regex, index after it)."""
    j = i + 1
    if j < len(glob) and glob[j] in "!^":
        j += 1
    if j < len(glob) and glob[j] == "]":
        j += 1
    while j < len(glob) and glob[j] != "]":
        j += 2 if glob[j] == "\\" else 1
    if j >= len(glob):
        return re.escape("["), i + 1
    body = glob[i + 1 : j]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    body = body.replace("\\", "\\\\").replace("[", "\\[")
    return ("[^/" if negate else "[") + body + "]", j + 1


def glob_to_regex(glob: str) -> str:
    """A gitignore glob (already stripped of anchors) as a regex over '/'-separated paths."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**/", i) and (i == 0 or glob[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i) and i + 2 == n and (i == 0 or glob[i - 1] == "/"):
            out.append(".*")
            i += 2
        elif c == "*":
            while i < n and glob[i] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            piece, i = _class_to_regex(glob, i)
            out.append(piece)
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _strip_trailing_spaces(line: str) -> str:
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        stripped += " "
    return stripped


def parse_rule(line: str) -> Rule | None:
    """One line of an ignore file as a Rule, or None for blanks and comments."""
    line = _strip_trailing_spaces(line.rstrip("\r\n"))
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated or line.startswith(("\\!", "\\#")):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    prefix = "" if anchored else "(?:.*/)?"
    try:
        regex = re.compile(prefix + glob_to_regex(line), re.DOTALL)
        by_name = not anchored and "**" not in line and "[" not in line  # then it matches one component at most
        name_regex = re.compile(glob_to_regex(line), re.DOTALL) if by_name else None
    except re.error:
        return None
    return Rule(regex, negated, dir_only, name_regex)


class RuleSet:
    """The rules of one ignore file, matched against paths relative to its directory."""

    def __init__(self, base: str, text: str) -> None:
        self.base = base.rstrip("/")
        self.rules = [r for r in map(parse_rule, text.splitlines()) if r is not None]
        union = "|".join(f"(?:{r.regex.pattern})" for r in self.rules)
        self._any = re.compile(union, re.DOTALL) if self.rules else None
        # when every rule matches by name only, the last path component decides whether any rule can match
        names = [r.name_regex for r in self.rules]
        self._any_name = (
            re.compile("|".join(f"(?:{n.pattern})" for n in names if n is not None), re.DOTALL)
            if self.rules and all(n is not None for n in names)
            else None
        )
        self._prefix = self.base + "/"

    def decide(self, path: str, is_dir: bool) -> bool | None:
        """True = ignored, False = re-included, None = no rule here speaks about ``path``."""
        if self._any is None or not path.startswith(self._prefix):
            return None
        if self._any_name is not None and self._any_name.fullmatch(path[path.rfind("/") + 1 :]) is None:
            return None
        rel = path[len(self._prefix) :]
        if self._any.fullmatch(rel) is None:
            return None
        for rule in reversed(self.rules):
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.fullmatch(rel):
                return not rule.negated
        return None


def is_ignored(levels: list[RuleSet], path: str, is_dir: bool) -> bool:
    """Deeper rule sets win; within one set the last matching rule wins."""
    for rules in reversed(levels):
        decision = rules.decide(path, is_dir)
        if decision is not None:
            return decision
    return False
