"""Keys in config.toml that openheim does not know: found while parsing, told with file, line and the nearest
known key, once each.

An unknown key is a warning, not an error (a newer config must not break an older openheim), unless strict
checking is on (`[config] strict = true`, `openheim --strict-config`, or OPENHEIM_STRICT_CONFIG=1).
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("openheim.config")

STRICT_ENV = "OPENHEIM_STRICT_CONFIG"  # 1: unknown config keys are errors (`openheim --strict-config`)


@dataclass(frozen=True)
class UnknownKey:
    section: str  # "" for the top level, else a dotted table name ("providers.openai")
    key: str
    suggestion: str | None  # the nearest known key, if one is close
    file: Path | None = None
    line: int | None = None

    @property
    def dotted(self) -> str:
        """The key as written, dotted below its table; control characters shown as escapes (it reaches a terminal)."""
        name = f"{self.section}.{self.key}" if self.section else self.key
        return name if name.isprintable() else name.encode("unicode_escape").decode("ascii")

    def message(self, ignored: bool = True) -> str:
        where = f"{self.file}:{self.line}: " if self.file and self.line else f"{self.file}: " if self.file else ""
        hint = f"; did you mean '{self.suggestion}'?" if self.suggestion else ""
        return f"{where}unknown key '{self.dotted}'{' ignored' if ignored else ''}{hint}"


_found: ContextVar[list[UnknownKey] | None] = ContextVar("unknown_config_keys", default=None)
_told: set[str] = set()  # messages already told by this process


def note_unknown(table: dict, known: Iterable[str], section: str) -> None:
    """Record (or, outside a load, tell at once) every key of ``table`` that is not in ``known``."""
    known = set(known)
    for key in sorted(set(table) - known):
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        found = UnknownKey(section, key, close[0] if close else None)
        sink = _found.get()
        if sink is None:
            tell([found])
        else:
            sink.append(found)


@contextmanager
def collecting() -> Iterator[list[UnknownKey]]:
    """Collect the unknown keys noted while the block runs, instead of telling them."""
    sink: list[UnknownKey] = []
    token = _found.set(sink)
    try:
        yield sink
    finally:
        _found.reset(token)


def locate(found: list[UnknownKey], text: str, file: Path) -> list[UnknownKey]:
    """The same keys with the file and the line each is written on (when it can be found in ``text``)."""
    return [UnknownKey(k.section, k.key, k.suggestion, file, key_line(text, k.section, k.key)) for k in found]


def key_line(text: str, section: str, key: str) -> int | None:
    """The 1-based line where ``key`` is assigned inside ``[section]`` (top level when section is "")."""
    current = ""
    assignment = re.compile(rf"""^\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""")
    for number, line in enumerate(text.splitlines(), 1):
        header = re.match(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", line)
        if header:
            current = ".".join(part.strip().strip("\"'") for part in header.group(1).split("."))
        elif current == section and assignment.match(line):
            return number
    return None


def tell(found: list[UnknownKey], quietly: bool = False) -> None:
    """Log each unknown key's message once per process (doctor and a run load the config more than once);
    ``quietly`` only marks them told (doctor shows them in its own lines)."""
    for unknown in found:
        text = unknown.message()
        if text not in _told:
            _told.add(text)
            if not quietly:
                log.warning("config: %s", text)
