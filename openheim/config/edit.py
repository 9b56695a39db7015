"""Small in-place edits of config.toml that keep the user's comments and layout (line-based, not a TOML rewrite)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from openheim.config.atomic import replace_text
from openheim.errors import ConfigError

_TUI_HEADER = re.compile(r"^\s*\[\s*tui\s*\]\s*(#.*)?$")
_THEME_KEY = re.compile(r"^\s*theme_color\s*=")


def with_theme(text: str, name: str) -> str:
    """``text`` with ``[tui].theme_color = "name"``: the key's line replaced, else added to the end of
    the ``[tui]`` section, else a new ``[tui]`` section appended. The trailing-newline state is kept."""
    if any(c in name for c in '"\\\n\r'):
        raise ConfigError(f"invalid theme name {name!r}: it must not contain quotes, backslashes or line breaks")
    entry = f'theme_color = "{name}"'
    ends_with_newline = text.endswith("\n")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _TUI_HEADER.match(line)), None)
    if start is None:
        lines += ([""] if any(line.strip() for line in lines) else []) + ["[tui]", entry]
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        key = next((i for i in range(start + 1, end) if _THEME_KEY.match(lines[i])), None)
        if key is not None:
            lines[key] = entry
        else:
            last = max([start] + [i for i in range(start + 1, end) if lines[i].strip()])
            lines.insert(last + 1, entry)
    out = "\n".join(lines)
    return out + "\n" if ends_with_newline or (start is None and not text) else out


def save_theme(path: Path | None, name: str) -> None:
    """Write ``[tui].theme_color`` into the config file at ``path`` (atomically; untouched on any error)."""
    if path is None:
        raise ConfigError("there is no config file to save the theme in (the client was built without one)")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    edited = with_theme(text, name)
    try:
        saved = tomllib.loads(edited).get("tui", {}).get("theme_color")
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} would not parse after the edit ({e}); set [tui] theme_color by hand") from None
    if saved != name:
        raise ConfigError(f"{path} defines [tui] in a way a line edit cannot change; set theme_color by hand")
    _replace(path, edited)


def _replace(path: Path, text: str) -> None:
    try:
        replace_text(path, text, path.stat().st_mode & 0o7777)
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from None
