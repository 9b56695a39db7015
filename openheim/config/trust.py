"""Files from a repository the user trusts: their real path and a SHA-256 of their content.

A project's ``.mcp.json`` runs commands and its ``.openheim/settings.toml`` pre-approves tool calls, so
both are used only after the user recorded them (``openheim mcp trust``, ``openheim permissions trust``);
any change to a file needs trusting again. Each kind has its own store in the data dir, as
``{"files": {path: {"sha256": ..., "trusted_at": ...}}}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from openheim.config.atomic import replace_text
from openheim.errors import ConfigError

TRUSTED, CHANGED, UNTRUSTED = "trusted", "changed", "untrusted"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def real_path(path: str | Path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def load(store: Path) -> dict[str, dict]:
    """The trusted files by real path (an unreadable store trusts nothing)."""
    try:
        data = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return {k: v for k, v in files.items() if isinstance(v, dict)} if isinstance(files, dict) else {}


def check(store: Path, path: Path, sha256: str) -> str:
    """``trusted``, ``changed`` (trusted with other content) or ``untrusted``."""
    entry = load(store).get(str(real_path(path)))
    if entry is None:
        return UNTRUSTED
    return TRUSTED if entry.get("sha256") == sha256 else CHANGED


def _save(store: Path, files: dict[str, dict]) -> None:
    store.parent.mkdir(parents=True, exist_ok=True)
    replace_text(store, json.dumps({"files": files}, indent=2, sort_keys=True) + "\n")


def record(store: Path, path: Path, data: bytes) -> str:
    """Record ``path`` as trusted with content ``data``; returns its SHA-256."""
    sha = digest(data)
    files = load(store)
    files[str(real_path(path))] = {"sha256": sha, "trusted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    _save(store, files)
    return sha


def trust(store: Path, path: Path) -> str:
    """Record ``path`` with its current content; returns the content's SHA-256."""
    try:
        data = real_path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    return record(store, path, data)


def untrust(store: Path, path: Path) -> bool:
    """Forget ``path``; False when it was not trusted."""
    files = load(store)
    if files.pop(str(real_path(path)), None) is None:
        return False
    _save(store, files)
    return True
