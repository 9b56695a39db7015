"""Subagent profiles: ``{data_dir}/agents/*.md``, a frontmatter block and a system prompt.

Two frontmatter styles are read: openheim's TOML between ``+++`` lines, and the YAML-style ``---``
block other agent CLIs use (``name``, ``description``, ``tools`` as a list or a comma string, ``model``),
so existing agent files work unchanged.
"""

from __future__ import annotations

import logging
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from openheim.core.control_chars import one_line

log = logging.getLogger(__name__)

MAX_PROFILE_BYTES = 256 * 1024


class ProfileError(ValueError):
    """A profile file that cannot be used; the message names the problem."""


@dataclass(frozen=True)
class AgentProfile:
    name: str
    system_prompt: str
    description: str = ""
    model: str | None = None
    provider: str | None = None
    tools: tuple[str, ...] | None = None  # None: every tool the parent has
    max_iterations: int | None = None
    path: Path | None = field(default=None, compare=False)


def split_frontmatter(text: str) -> tuple[str | None, str | None, str]:
    """(style "toml" / "yaml" / None, the frontmatter text, the body)."""
    stripped = text.lstrip()
    for fence, style in (("+++", "toml"), ("---", "yaml")):
        if stripped.startswith(fence):
            rest = stripped[len(fence) :]
            if rest and rest[0] not in "\r\n":
                continue
            lines = rest.splitlines(keepends=True)
            for i, line in enumerate(lines[1:], start=1):
                if line.startswith(fence):
                    return style, "".join(lines[1:i]), "".join(lines[i + 1 :])
            raise ProfileError(f"unterminated '{fence}' frontmatter block")
    return None, None, text


def parse_yaml_subset(text: str) -> dict:
    """``key: value`` lines, ``[a, b]`` inline lists and ``- item`` block lists: what agent files use."""
    data: dict = {}
    key: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.lstrip().startswith("- ") and key is not None:
            if not isinstance(data.get(key), list):
                data[key] = []
            data[key].append(_scalar(line.lstrip()[2:]))
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or name != name.lstrip():
            raise ProfileError(f"invalid frontmatter: line {number} is not 'key: value'")
        key, value = name.strip(), value.strip()
        if value.startswith("[") and value.endswith("]"):
            data[key] = [_scalar(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            data[key] = _scalar(value) if value else None
    return data


def _scalar(value: str) -> object:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    if value.lstrip("-").isdigit():
        return int(value)
    return value


def _str_or_none(data: dict, key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProfileError(f"invalid frontmatter: '{key}' must be a string")
    return value.strip() or None


# Tool names other agent CLIs use in their agent files, and ours.
TOOL_ALIASES = {
    "Read": "read_file",
    "Write": "write_file",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "Grep": "search",
    "Glob": "list_dir",
    "LS": "list_dir",
    "Bash": "execute_command",
    "WebFetch": "web_fetch",
}


def _tools(data: dict) -> tuple[str, ...] | None:
    value = data.get("tools")
    if value is None:
        return None
    if isinstance(value, str):
        value = list(value.split(","))
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProfileError("invalid frontmatter: 'tools' must be a list of tool names or a comma-separated string")
    names = [TOOL_ALIASES.get(v.strip(), v.strip()) for v in value if v.strip()]
    return tuple(dict.fromkeys(names))


def _max_iterations(data: dict) -> int | None:
    value = data.get("max_iterations")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ProfileError("invalid frontmatter: 'max_iterations' must be a positive integer")
    return value


def parse_profile(name: str, text: str, path: Path | None = None) -> AgentProfile:
    """A profile from a file's text; ProfileError says what is wrong."""
    style, front, body = split_frontmatter(text)
    data: dict = {}
    if style == "toml":
        try:
            data = tomllib.loads(front or "")
        except tomllib.TOMLDecodeError as e:
            raise ProfileError(f"invalid frontmatter: {e}") from None
        except RecursionError:
            raise ProfileError("invalid frontmatter: nested too deeply") from None
    elif style == "yaml":
        data = parse_yaml_subset(front or "")
    prompt = body.strip()  # may be empty: the frontmatter alone is a profile (as upstream loads it)
    model = _str_or_none(data, "model")
    # name and description reach the terminal (run -v, the chat) and the model: no control characters
    return AgentProfile(
        name=one_line(_str_or_none(data, "name") or "") or one_line(name),
        system_prompt=prompt,
        description=one_line(_str_or_none(data, "description") or ""),
        model=None if model == "inherit" else model,
        provider=_str_or_none(data, "provider"),
        tools=_tools(data),
        max_iterations=_max_iterations(data),
        path=path,
    )


def load_profiles(agents_dir: Path) -> list[AgentProfile]:
    """Every usable profile in ``agents_dir``, sorted by name; a broken file is skipped with a warning."""
    try:
        paths = sorted(p for p in agents_dir.iterdir() if p.suffix == ".md" and p.is_file())
    except FileNotFoundError:
        return []
    except OSError as e:
        log.warning("cannot list subagent profiles in %s: %s", agents_dir, e.strerror or e)
        return []
    profiles: dict[str, AgentProfile] = {}
    for path in paths:
        try:
            with path.open("rb") as f:
                raw = f.read(MAX_PROFILE_BYTES + 1)
            if len(raw) > MAX_PROFILE_BYTES:
                raise ProfileError(f"larger than {MAX_PROFILE_BYTES // 1024} KiB")
            profile = parse_profile(path.stem, raw.decode("utf-8"), path)
        except (OSError, UnicodeDecodeError, ProfileError) as e:
            log.warning("skipping subagent profile %s: %s", path, e)
            continue
        profiles[profile.name] = profile
    return [profiles[n] for n in sorted(profiles)]
