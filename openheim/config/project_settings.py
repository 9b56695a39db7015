"""A project's ``.openheim/settings.toml``: its ``[permissions]`` rules, read and appended to.

The files are looked for like ``AGENTS.md``: in every directory from the sandbox root down to the
session's directory; their rules are added together. A repository is code from strangers, so a file's
allow rules apply only once the user trusted it (``openheim permissions trust``, recorded by content hash
in ``{data_dir}/settings-trust.json``; a changed file needs trusting again); its deny rules, which can only
refuse, always apply. "Allow always" in ACP appends to the innermost one (and keeps it trusted when it was).
"""

from __future__ import annotations

import logging
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from openheim.config import trust
from openheim.config.named_files import shell_files
from openheim.config.regular_file import read_regular
from openheim.config.rules import RuleSet
from openheim.config.schema import parse_permissions
from openheim.config.workspace_write import write_beneath
from openheim.errors import ConfigError, OpenheimError

log = logging.getLogger(__name__)

SETTINGS = Path(".openheim") / "settings.toml"
TRUST_FILE = "settings-trust.json"
MAX_BYTES = 1 << 20
_warned: set[tuple[str, str]] = set()  # (file, sha256) already reported as untrusted in this process


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


@dataclass
class SettingsFile:
    """One project settings file as read: its real path, content hash, trust and parsed TOML."""

    path: Path
    sha256: str
    trust: str  # trusted | changed | untrusted
    data: dict
    changed_file: str | None = None  # a file its hooks run that changed since it was trusted

    def notice(self) -> str:
        how = f"run `openheim permissions trust {self.path}` to use them"
        if self.changed_file is not None:
            return (
                f"{self.changed_file}, which a hook of {self.path} runs, changed since you trusted it, so the "
                f"file's hooks and allow rules are ignored; {how}"
            )
        if self.trust == trust.CHANGED:
            return f"{self.path} changed since you trusted it, so its allow rules are ignored; {how}"
        return f"{self.path} is not trusted, so its allow rules are ignored; {how}"


def _raw(path: Path) -> bytes:
    try:
        raw = read_regular(path, MAX_BYTES)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{path} is larger than 1 MiB; it should hold only [permissions]")
    return raw


def _parse(path: Path, raw: bytes) -> dict:
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"TOML parse error in {path}: {e} (fix or delete the file)") from None
    except RecursionError:
        raise ConfigError(f"{path} is nested too deeply (fix or delete the file)") from None


def _read(path: Path) -> dict:
    return _parse(path, _raw(path))


def read_settings(root: Path, cwd: Path | None, data_dir: Path | None) -> list[SettingsFile]:
    """Every project settings file from the root down to ``cwd``, with whether the user trusts it
    (``data_dir`` None: none is trusted)."""
    found = []
    for path in settings_files(root, cwd):
        raw = _raw(path)
        sha = trust.digest(raw)
        state, changed = (
            trust.check_detail(data_dir / TRUST_FILE, path, sha) if data_dir is not None else (trust.UNTRUSTED, None)
        )
        found.append(SettingsFile(trust.real_path(path), sha, state, _parse(path, raw), changed))
    return found


def load_project_rules(root: Path, cwd: Path | None, data_dir: Path | None = None) -> RuleSet:
    """Every project settings file's rules, outermost first: deny rules always, allow rules only from
    files the user trusts (one warning per untrusted file that has any); a ConfigError naming the file
    and the rule."""
    rules = RuleSet()
    for found in read_settings(root, cwd, data_dir):
        table = found.data.get("permissions", {})
        if not isinstance(table, dict):
            raise ConfigError(f"'permissions' must be a table ([permissions]) (in {found.path})")
        try:
            parsed = parse_permissions(table, str(found.path))
        except ConfigError as e:
            raise ConfigError(f"{e.message} (in {found.path})") from None
        if found.trust != trust.TRUSTED and parsed.allow:
            if (str(found.path), found.sha256) not in _warned:
                _warned.add((str(found.path), found.sha256))
                log.warning("%s", found.notice())
            parsed = RuleSet((), parsed.deny)
        rules = rules + parsed
    return rules


def trust_file(data_dir: Path, path: Path) -> tuple[str, RuleSet]:
    """Trust a project settings file as it is now (its rules must parse); returns its SHA-256 and rules."""
    raw = _raw(path)
    table = _parse(path, raw).get("permissions", {})
    if not isinstance(table, dict):
        raise ConfigError(f"'permissions' must be a table ([permissions]) (in {path}); nothing was trusted")
    try:
        rules = parse_permissions(table, str(path))
    except ConfigError as e:
        raise ConfigError(f"{e.message} (in {path}); nothing was trusted") from None
    return trust.record(data_dir / TRUST_FILE, path, raw, hook_files(path, _parse(path, raw))), rules


def untrust_file(data_dir: Path, path: Path) -> bool:
    return trust.untrust(data_dir / TRUST_FILE, path)


def save_allow_rule(root: Path, cwd: Path | None, rule: str, data_dir: Path | None = None) -> Path:
    """Append ``rule`` to ``[permissions] allow`` of the innermost settings file (else ``root``'s, created),
    atomically, keeping what the file holds; returns the file. A rule already there is not repeated.
    A file the user trusted, or one without allow rules, is trusted with its new content (``data_dir`` given)."""
    import tomli_w

    existing = settings_files(root, cwd)
    path = existing[-1] if existing else Path(os.path.realpath(root)) / SETTINGS
    raw = _raw(path) if path.is_file() else b""
    text = path.read_text(encoding="utf-8") if raw else ""
    data = _read(path) if text else {}
    table = data.get("permissions")
    # The user's own choice: the file stays (or becomes) trusted unless it held allow rules nobody trusted.
    store = data_dir / TRUST_FILE if data_dir is not None else None
    keep = store is not None and (
        not _has_allow_rules(table) or trust.check(store, path, trust.digest(raw)) == trust.TRUSTED
    )
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
    _replace(path, edited, root)
    if keep and store is not None:
        trust.record(store, path, edited.encode("utf-8"), hook_files(path, tomllib.loads(edited)))
    return path


def project_dir(path: Path) -> Path:
    """The directory a ``.openheim/settings.toml`` belongs to."""
    return trust.real_path(path).parent.parent


def hook_files(path: Path, data: dict) -> list[Path]:
    """The workspace files the hooks of settings file ``path`` (parsed as ``data``) name in their commands."""
    hooks = data.get("hooks")
    commands = [
        h["command"]
        for h in (hooks if isinstance(hooks, list) else [])
        if isinstance(h, dict) and isinstance(h.get("command"), str)
    ]
    return [f for command in commands for f in shell_files(command, project_dir(path))] if commands else []


def _has_allow_rules(table: object) -> bool:
    return isinstance(table, dict) and bool(table.get("allow"))


def _with_table(text: str, name: str, table: dict) -> str | None:
    """``text`` with its last table ``[name]`` rewritten as ``table`` (what comes before it, comments
    included, stays); None when ``[name]`` is not the file's last table or the result would differ."""
    import re

    import tomli_w

    lines = text.splitlines(keepends=True)
    header = re.compile(rf"^\s*\[\s*{re.escape(name)}\s*\]\s*(#.*)?$")
    starts = [i for i, line in enumerate(lines) if header.match(line)]
    if len(starts) != 1 or any(
        line.lstrip().startswith("[") and not line.lstrip().startswith(('["', "['")) for line in lines[starts[0] + 1 :]
    ):
        return None
    head = "".join(lines[: starts[0]])
    edited = head + tomli_w.dumps({name: table})
    expected = tomllib.loads(text)
    expected[name] = table
    try:
        return edited if tomllib.loads(edited) == expected else None
    except tomllib.TOMLDecodeError:
        return None


def _replace(path: Path, text: str, root: Path) -> None:
    """Write the settings file through the workspace writer, below the project root: a symlinked
    ``.openheim`` (a repository can ship one) is refused, never followed out of the project."""
    real_root = os.path.realpath(root)
    rel = os.path.relpath(path, real_root)  # settings_files builds every path below the real root
    if rel.startswith(".."):
        raise ConfigError(f"cannot write {path}: it is not below the project root {real_root}")
    mode = os.stat(path).st_mode & 0o777 if path.is_file() and not path.is_symlink() else 0o644
    try:
        write_beneath(real_root, rel, text.encode("utf-8"), mode=mode)
    except (OSError, OpenheimError) as e:
        raise ConfigError(f"cannot write {path}: {getattr(e, 'strerror', None) or e}") from None
