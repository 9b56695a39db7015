"""``[[hooks]]`` in a project's ``.openheim/settings.toml``: used only from files the user trusts.

A repository is code from strangers and a hook runs commands as the user, so a project file's hooks
run only once ``openheim permissions trust FILE`` recorded the file as it is now; until then they are
ignored with one warning per file (and content).
"""
from __future__ import annotations

import logging
from pathlib import Path

from openheim.config.hooks import HookSpec, parse_hooks
from openheim.config.project_settings import settings_files
from openheim.errors import ConfigError

log = logging.getLogger(__name__)
TRUST_STORE = "settings-trust.json"
_warned: set[tuple[str, str]] = set()


def load_project_hooks(root: Path, cwd: Path | None, data_dir: Path | None) -> tuple[HookSpec, ...]:
    """The hooks of the trusted project settings files from the root down to ``cwd``, outermost first."""
    hooks: tuple[HookSpec, ...] = ()
    for path in settings_files(root, cwd):
        data, sha, trusted = _read_trusted(path, data_dir)
        if "hooks" not in data:
            continue
        if not trusted:
            if (str(path), sha) not in _warned:
                _warned.add((str(path), sha))
                log.warning("%s has hooks that do not run until you trust it: run `openheim permissions trust "
                            "%s` (hooks run commands as you)", path, path)
            continue
        try:
            hooks += parse_hooks(data["hooks"], str(path))
        except ConfigError as e:
            raise ConfigError(f"{e.message} (in {path})") from None
    return hooks


def _read_trusted(path: Path, data_dir: Path | None) -> tuple[dict, str, bool]:
    """(the file's TOML, its SHA-256, whether the user trusts it: recorded with this content in the project
    settings trust store, ``{data_dir}/settings-trust.json``, which `openheim permissions trust` writes)."""
    import hashlib

    from openheim.config.project_settings import _read

    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return _read(path), sha, data_dir is not None and _recorded(data_dir / TRUST_STORE, path, sha)


def _recorded(store: Path, path: Path, sha: str) -> bool:
    """Whether ``store`` ({"files": {real path: {"sha256": ...}}}) trusts ``path`` with content ``sha``."""
    import json
    import os

    try:
        files = json.loads(store.read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError, RecursionError):
        return False
    entry = files.get(os.path.realpath(path)) if isinstance(files, dict) else None
    return isinstance(entry, dict) and entry.get("sha256") == sha
