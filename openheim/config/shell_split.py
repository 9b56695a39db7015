"""Shell command lines as permission rules see them: split into simple commands, quotes removed (no I/O).

Each simple command (a ``ShellPart``) has three forms. ``plain``: its words as written, quotes removed,
what an allow rule must match. ``text``: with what only wraps the command dropped (``VAR=x`` assignments,
``env``, ``command``, ``nohup``, ``timeout 5``, ``{``, ``!`` ...), what a deny rule or a hook matcher
matches. ``also``: more forms a deny rule and a hook matcher check (``/bin/rm`` as ``rm``, the command
inside ``sh -c``, ``eval``, ``xargs``, ``env -S``, ``git -C dir push`` as ``git push``). ``risky`` names
what the plain form carries that changes what runs (an assignment, a wrapper, a shell ``-c``, a program's
global option such as ``git -c``): an allow rule covers the part only when its pattern spells each of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_COMMENT_AFTER = " \t\n;&|()`"
_BLANKS = " \t\r\f\v\n"
_ASSIGNMENT = r"[A-Za-z_][A-Za-z0-9_]*="
# Words that only wrap the command after them (with their options); allow rules must spell them.
WRAPPERS = frozenset(
    {
        "env", "command", "builtin", "exec", "nohup", "nice", "time", "timeout", "stdbuf", "setsid",
        "xargs", "ionice", "taskset", "chrt", "flock", "unbuffer", "sudo", "doas",
    }
)  # fmt: skip
# Wrapper options that take the next word as their value (env -u VAR, nice -n 5, timeout -s KILL, xargs -I {}).
_OPTION_VALUES = frozenset({"-u", "-C", "-S", "-n", "-o", "-e", "-s", "-k", "-c", "-a", "-I", "-L", "-P", "-d"})
# Reserved words that open a compound command or negate it: they change nothing about what runs.
_KEYWORDS = frozenset({"{", "!", "if", "then", "elif", "else", "do", "while", "until"})
_CLOSERS = frozenset({"}", "fi", "done", "esac"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "busybox"})
# Global options (before the subcommand) that change what a program runs: ``git -c diff.external=x diff``.
GLOBAL_OPTIONS = {
    "git": frozenset(
        {"-c", "-C", "--git-dir", "--work-tree", "--exec-path", "--namespace", "--config-env", "--super-prefix"}
    ),
}
_GLOBAL_TAKES_VALUE = {"git": frozenset({"-c", "-C", "--git-dir", "--work-tree", "--namespace", "--config-env"})}


@dataclass(frozen=True)
class ShellPart:
    """One simple command of a compound shell command (see the module docstring for its forms)."""

    text: str
    redirects: bool = False  # an unquoted > or < (writes or reads a file the rule may not name)
    raw: str = ""  # as written
    also: tuple[str, ...] = ()
    plain: str = ""
    risky: tuple[str, ...] = ()

    @property
    def allow_form(self) -> str:
        return self.plain or self.text


class _Splitter:
    """The state of one pass over a command line (see split_command)."""

    def __init__(self, line: str) -> None:
        self.line, self.i = line, 0
        self.parts: list[ShellPart] = []
        self.current: list[str] = []
        self.redirects = False
        self.quote = ""  # "", "'" or '"'
        self.nested: list[tuple[str, str]] = []  # open substitutions: ("`" or "$(", the quote they were opened in)

    def cut(self) -> None:
        raw = "".join(self.current).strip(_BLANKS)
        if raw:
            part = shell_part(raw, self.redirects)
            if part is not None:
                self.parts.append(part)
        self.current.clear()
        self.redirects = False

    def substitution(self, c: str) -> bool:
        """Handle a backtick or ``$(``/``)`` that opens or closes a substitution; False when ``c`` is not one."""
        line, i = self.line, self.i
        if c == "`" and self.nested and self.nested[-1][0] == "`" and self.quote == "":
            self.cut()
            self.quote = self.nested.pop()[1]
        elif c == "`" or (c == "$" and line[i + 1 : i + 2] == "("):
            self.cut()
            self.nested.append((c if c == "`" else "$(", self.quote))
            self.quote = ""
            self.i += 1 if c == "$" else 0
        elif c == ")" and self.quote == "" and self.nested and self.nested[-1][0] == "$(":
            self.cut()
            self.quote = self.nested.pop()[1]
        else:
            return False
        return True

    def unquoted(self, c: str) -> None:
        line, i = self.line, self.i
        if c in "'\"":
            self.current.append(c)
            self.quote = c
        elif c == "#" and (i == 0 or line[i - 1] in _COMMENT_AFTER):
            while self.i + 1 < len(line) and line[self.i + 1] != "\n":
                self.i += 1
        elif c == "&" and (line[i - 1 : i] in ("<", ">") or line[i + 1 : i + 2] == ">"):
            self.current.append(c)
            self.redirects = self.redirects or line[i + 1 : i + 2] == ">"
        elif c in ";&|\n()":
            self.cut()
        else:
            self.redirects = self.redirects or c in "<>"
            self.current.append(c)

    def step(self) -> bool:
        """Consume one character (or an escape); False when the line cannot be parsed."""
        line, c = self.line, self.line[self.i]
        if self.quote and c == "\n":
            return False
        if self.quote == "'":
            self.current.append(c)
            self.quote = "" if c == "'" else self.quote
        elif c == "\\" and self.i + 1 < len(line):
            self.current.append(line[self.i : self.i + 2])
            self.i += 1
        elif self.substitution(c):
            pass
        elif self.quote == '"':
            self.current.append(c)
            self.quote = "" if c == '"' else self.quote
        else:
            self.unquoted(c)
        self.i += 1
        return True


def split_command(line: str) -> list[ShellPart] | None:
    """The simple commands of a shell line, quote-aware; None when it cannot be parsed (unbalanced quotes, or
    a newline inside quotes, which no allow rule may cover).

    Separators: ``;`` ``&`` ``|`` newline ``(`` ``)`` outside quotes, and backticks and ``$(`` also inside
    double quotes (their contents run as commands). ``>&``, ``<&`` and ``&>`` are redirections, not ``&``.
    An unquoted ``#`` at the start of a word starts a comment that runs to the end of the line. A part that is
    only a closing word (``}``, ``fi``, ``done``) is left out.
    """
    s = _Splitter(line)
    while s.i < len(line):
        if not s.step():
            return None
    if s.quote or s.nested or line.rstrip().endswith("\\"):
        return None
    s.cut()
    return s.parts


def shell_words(text: str) -> list[str]:
    """``text`` split into words as the shell would: blanks separate, quotes and backslashes are removed (an
    unclosed quote runs to the end)."""
    words: list[str] = []
    word: list[str] = []
    started, quote, i = False, "", 0
    while i < len(text):
        c = text[i]
        if quote == "'":
            quote = "" if c == "'" else quote
            word += [] if c == "'" else [c]
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
            started, i = True, i + 1
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


def _wrapper_options(wrapper: str, words: list[str], i: int) -> tuple[int, list[str]]:
    """Skip a wrapper's options from ``words[i]``: (the index after them, words ``env -S`` splits out)."""
    split: list[str] = []
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        word = words[i]
        if wrapper == "env" and (word == "-S" or word.startswith("--split-string")):
            value = word.split("=", 1)[1] if "=" in word else (words[i + 1] if i + 1 < len(words) else "")
            split += shell_words(value)
            i += 1 if "=" in word else 2
            continue
        i += 2 if word in _OPTION_VALUES and i + 1 < len(words) else 1
    if wrapper == "timeout" and i < len(words):
        i += 1  # the duration
    return i, split


def unwrap(words: list[str]) -> tuple[list[str], list[str]]:
    """(the command words with assignments, wrappers and keywords in front dropped; the risky words dropped).
    ``FOO=1 env -i nohup rm x`` -> (``rm x``, [``FOO=``, ``env``, ``nohup``]); a line of assignments only
    stays as it is."""
    i, risky = 0, []
    while i < len(words):
        word = words[i]
        if re.match(_ASSIGNMENT, word):
            risky.append(word.split("=", 1)[0] + "=")
            i += 1
        elif word in _KEYWORDS:
            i += 1
        elif word in WRAPPERS:
            risky.append(word)
            i, split = _wrapper_options(word, words, i + 1)
            words = [*words[:i], *split, *words[i:]]
        else:
            break
    return (words[i:], risky) if i < len(words) else (words, risky)


def global_options(words: list[str]) -> tuple[list[str], list[str]]:
    """(``words`` without the program's global options before its subcommand; the risky options among them).
    ``git -C . -c a=b push`` -> (``git push``, [``-C``, ``-c``])."""
    program = words[0].rsplit("/", 1)[-1] if words else ""
    known = GLOBAL_OPTIONS.get(program)
    if known is None:
        return words, []
    i, risky = 1, []
    while i < len(words) and words[i].startswith("-"):
        name = words[i].split("=", 1)[0]
        if name in known:
            risky.append(name)
        takes_value = name in _GLOBAL_TAKES_VALUE[program] and "=" not in words[i]
        i += 2 if takes_value else 1
    return [words[0], *words[i:]], risky


def _inner_commands(words: list[str]) -> tuple[str, ...]:
    """What a deny rule must also see: the command word without its directory, the command without global
    options, and the command run by ``sh -c X``, ``eval X`` and ``xargs [opts] X``."""
    if not words:
        return ()
    out: list[str] = []
    base = words[0].rsplit("/", 1)[-1]
    if base != words[0]:
        out.append(" ".join([base, *words[1:]]))
    stripped, found = global_options([base, *words[1:]])
    if found or len(stripped) != len(words):
        out.append(" ".join(stripped))
    if base in SHELLS and "-c" in words[1:]:
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
            out.append(" ".join(unwrap(rest)[0]))
    return tuple(dict.fromkeys(out))


def _risky_in(words: list[str]) -> list[str]:
    """The risky words of a command already unwrapped: a shell's ``-c`` and the program's global options."""
    base = words[0].rsplit("/", 1)[-1] if words else ""
    shell_c = ["-c"] if base in SHELLS and "-c" in words[1:] else []
    return shell_c + global_options(words)[1]


def shell_part(raw: str, redirects: bool) -> ShellPart | None:
    """One simple command in its forms; None for a part that is only a closing word (``}``, ``fi``)."""
    written = shell_words(raw)
    if written and all(w in _CLOSERS for w in written):
        return None
    words, risky = unwrap(written)
    risky += _risky_in(words)
    lead = next((k for k, w in enumerate(written) if w not in _KEYWORDS), len(written))
    plain = " ".join(written[lead:])
    inner = _inner_commands(words)
    return ShellPart(" ".join(words) or raw, redirects, raw, inner, plain or raw, tuple(dict.fromkeys(risky)))


def spells(pattern: str, risky: str) -> bool:
    """Whether an allow pattern spells a risky word: ``FOO=`` as a word starting ``FOO=``, an option as
    itself or ``--opt=...``, a wrapper as a word."""
    words = pattern.split()
    if risky.endswith("="):
        return any(w.startswith(risky) for w in words)
    return any(w == risky or w.startswith(risky + "=") for w in words)
