"""A project's ``.openheim/settings.toml``: its ``[permissions]`` rules, read and appended to.

The files are looked for like ``AGENTS.md``: in every directory from the sandbox root down to the
session's directory; their rules are added together. Their allow rules can only narrow what the user
allows (see ``rules.decide`` and docs/pipelines.md); "allow always" in ACP appends to the innermost one.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

from openheim.config.rules import RuleSet
from openheim.errors import ConfigError

SETTINGS = Path(".openheim") / "settings.toml"
MAX_BYTES = 1 << 20


def directories(root: Path, cwd: Path | None) -> list[Path]:
    """The root and every directory below it down to ``cwd``, outermost first (just the root if cwd is outside).

    Both are resolved first, so a symlinked spelling of either still relates them (AGENTS.md and the
    project settings files are found along this path).
    """
    root = Path(os.path.realpath(root))
    if cwd is None:
        return [root]
    try:
        parts = Path(os.path.realpath(cwd)).relative_to(root).parts
    except ValueError:
        return [root]
    dirs = [root]
    for part in parts:
        dirs.append(dirs[-1] / part)
    return dirs


def settings_files(root: Path, cwd: Path | None) -> list[Path]:
    return [d / SETTINGS for d in directories(root, cwd) if (d / SETTINGS).is_file()]


def _read(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{path} is larger than 1 MiB; it should hold only [permissions]")
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"TOML parse error in {path}: {e} (fix or delete the file)") from None


def load_project_rules(root: Path, cwd: Path | None) -> RuleSet:
    """Every project settings file's rules, outermost first; a ConfigError naming the file and the rule."""
    from openheim.config.schema import parse_permissions

    rules = RuleSet()
    for path in settings_files(root, cwd):
        data = _read(path)
        table = data.get("permissions", {})
        if not isinstance(table, dict):
            raise ConfigError(f"'permissions' must be a table ([permissions]) (in {path})")
        try:
            rules = rules + parse_permissions(table, str(path))
        except ConfigError as e:
            raise ConfigError(f"{e.message} (in {path})") from None
    return rules


def save_allow_rule(root: Path, cwd: Path | None, rule: str) -> Path:
    """Append ``rule`` to ``[permissions] allow`` of the innermost settings file (else ``root``'s, created),
    atomically, keeping what the file holds; returns the file. A rule already there is not repeated."""
    import tomli_w

    existing = settings_files(root, cwd)
    path = existing[-1] if existing else Path(os.path.realpath(root)) / SETTINGS
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    data = _read(path) if text else {}
    table = data.get("permissions")
    if table is None:  # append a new table as text, so the file's comments stay
        edited = text + ("\n" if text and not text.endswith("\n") else "") + ("\n" if text else "")
        edited += tomli_w.dumps({"permissions": {"allow": [rule]}})
    else:
        if not isinstance(table, dict) or not isinstance(table.get("allow", []), list):
            raise ConfigError(f"cannot add a rule to {path}: its [permissions] allow is not a list")
        if rule in table.get("allow", []):
            return path
        table["allow"] = [*table.get("allow", []), rule]
        edited = _with_table(text, "permissions", table) or tomli_w.dumps(data)
    _replace(path, edited)
    return path


def _with_table(text: str, name: str, table: dict) -> str | None:
    """``text`` with its last table ``[name]`` rewritten as ``table`` (what comes before it, comments
    included, stays); None when ``[name]`` is not the file's last table or the result would differ."""
    import re

    import tomli_w

    lines = text.splitlines(keepends=True)
    header = re.compile(rf"^\s*\[\s*{re.escape(name)}\s*\]\s*(#.*)?$")
    starts = [i for i, line in enumerate(lines) if header.match(line)]
    if len(starts) != 1 or any(line.lstrip().startswith("[") and not line.lstrip().startswith(("[\"", "['"))
                               for line in lines[starts[0] + 1:]):
        return None
    head = "".join(lines[: starts[0]])
    edited = head + tomli_w.dumps({name: table})
    expected = tomllib.loads(text)
    expected[name] = table
    try:
        return edited if tomllib.loads(edited) == expected else None
    except tomllib.TOMLDecodeError:
        return None


def _replace(path: Path, text: str) -> None:
    import tempfile  # only when settings are written: a plain prompt does not pay for it

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise ConfigError(f"cannot write {path}: {e.strerror or e}") from None
