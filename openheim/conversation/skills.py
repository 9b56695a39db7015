"""Skills: Markdown files the user keeps in ``{data_dir}/skills``, added to the system prompt by name.

Two layouts: ``skills/{name}.md`` (checked first) and ``skills/{name}/SKILL.md``. Either may open with
frontmatter between ``---`` lines; only simple ``key: value`` lines are read (``description`` is kept) and the
body after it is the skill's content. A skill's name is its file stem or directory name.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from openheim.config.bounded_read import read_bounded
from openheim.errors import InvalidArgument, NotFound, OpenheimError

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 1 << 20  # a skill is read through the bounded reader: no FIFO, no device, at most this


@dataclass(frozen=True)
class Skill:
    """A skill file: its name, one-line description and content."""

    name: str
    description: str
    content: str


def is_valid_name(name: str) -> bool:
    """A single normal path component: not empty, no '..' anywhere, no separator, no NUL."""
    if not name or name in (".", "..") or ".." in name or "\0" in name:
        return False
    return not any(sep and sep in name for sep in ("/", "\\", os.sep, os.altsep))


def validate_name(name: str) -> str:
    if not is_valid_name(name):
        raise InvalidArgument(f"Invalid skill name '{name}': must be a single path component without '..'")
    return name


def split_frontmatter(text: str) -> tuple[dict[str, str], str]:
    """Simple ``key: value`` pairs of a leading ``---`` block, and the body after it."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            fields = _parse_fields(lines[1:index])
            if not fields:
                break  # a Markdown rule, not frontmatter
            return fields, "".join(lines[index + 1 :]).lstrip("\r\n")
    return {}, text


def _parse_fields(lines: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in lines:
        if line[:1].isspace() or ":" not in line or line.lstrip().startswith("#"):
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        fields[key.strip()] = value
    return fields


class SkillsManager:
    """Loads skills from one directory."""

    def __init__(self, skills_dir: Path | str) -> None:
        self.dir = Path(skills_dir)

    def load(self, name: str) -> Skill:
        """The skill called ``name``; InvalidArgument for a bad name, NotFound when missing."""
        validate_name(name)
        flat, nested = self.dir / f"{name}.md", self.dir / name / SKILL_FILE
        path = flat if flat.is_file() else nested if nested.is_file() else None
        if path is None:
            raise NotFound(f"Skill '{name}' not found at {flat} (or {nested})")
        self._check_inside(name, path)
        try:
            text = read_bounded(path, MAX_SKILL_BYTES).decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise OpenheimError(f"could not read skill '{name}' at {path}: {e}; fix or remove the file") from None
        fields, body = split_frontmatter(text)
        return Skill(name, fields.get("description", ""), body)

    def names(self) -> list[str]:
        """Names of the skills present in either layout, sorted."""
        if not self.dir.is_dir():
            return []
        found: set[str] = set()
        for entry in self.dir.iterdir():
            if entry.suffix == ".md" and entry.is_file() and is_valid_name(entry.stem):
                found.add(entry.stem)
            elif entry.is_dir() and is_valid_name(entry.name) and (entry / SKILL_FILE).is_file():
                found.add(entry.name)
        return sorted(found)

    def list(self) -> list[Skill]:
        """Every loadable skill, sorted by name (unloadable ones are skipped with a warning)."""
        skills: list[Skill] = []
        for name in self.names():
            try:
                skills.append(self.load(name))
            except OpenheimError as e:
                log.warning("skipping skill %s: %s", name, e)
        return skills

    def _check_inside(self, name: str, path: Path) -> None:
        root = os.path.realpath(self.dir)
        target = os.path.realpath(path)
        if os.path.commonpath([root, target]) != root:
            raise InvalidArgument(f"Skill '{name}' resolves outside the skills directory ({target})")
