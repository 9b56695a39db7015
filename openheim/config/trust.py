"""Files from a repository the user trusts: their real path and a SHA-256 of their content.

A project's ``.mcp.json`` runs commands and its ``.openheim/settings.toml`` pre-approves tool calls, so
both are used only after the user recorded them (``openheim mcp trust``, ``openheim permissions trust``);
any change to a file needs trusting again. What such a file runs from the workspace (``sh scripts/lint.sh``:
``config.named_files``) is recorded with it, and a change to one of those needs trusting again too. Each
kind has its own store in the data dir, as
``{"files": {path: {"sha256": ..., "trusted_at": ..., "runs": {path: sha256}}}}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from openheim.config.atomic import replace_text
from openheim.config.named_files import digests, first_changed
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
    """``trusted``, ``changed`` (trusted with other content, or a file it runs changed) or ``untrusted``."""
    return check_detail(store, path, sha256)[0]


def check_detail(store: Path, path: Path, sha256: str) -> tuple[str, str | None]:
    """(``check``'s answer, the file it runs that changed since it was trusted, if that is why)."""
    entry = load(store).get(str(real_path(path)))
    if entry is None:
        return UNTRUSTED, None
    if entry.get("sha256") != sha256:
        return CHANGED, None
    changed = first_changed(pinned(entry))
    return (CHANGED, changed) if changed is not None else (TRUSTED, None)


def pinned(entry: dict) -> dict[str, str]:
    """The files a trusted file runs, with their content hashes as trusted."""
    runs = entry.get("runs")
    return {str(k): str(v) for k, v in runs.items()} if isinstance(runs, dict) else {}


def pinned_files(store: Path, path: Path) -> dict[str, str]:
    """``pinned`` of ``path``'s entry (empty when it is not trusted)."""
    return pinned(load(store).get(str(real_path(path)), {}))


def _save(store: Path, files: dict[str, dict]) -> None:
    store.parent.mkdir(parents=True, exist_ok=True)
    replace_text(store, json.dumps({"files": files}, indent=2, sort_keys=True) + "\n")


def record(store: Path, path: Path, data: bytes, runs: Iterable[Path] = ()) -> str:
    """Record ``path`` as trusted with content ``data`` and the files it ``runs`` as they are now; returns
    its SHA-256."""
    sha = digest(data)
    files = load(store)
    entry: dict[str, object] = {"sha256": sha, "trusted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    hashed = digests(runs)
    if hashed:
        entry["runs"] = hashed
    files[str(real_path(path))] = entry
    _save(store, files)
    return sha


def trust(store: Path, path: Path, runs: Callable[[bytes], Iterable[Path]] = lambda data: ()) -> str:
    """Record ``path`` with its current content and the files ``runs(content)`` names; returns the
    content's SHA-256."""
    try:
        data = real_path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    return record(store, path, data, runs(data))


def untrust(store: Path, path: Path) -> bool:
    """Forget ``path``; False when it was not trusted."""
    files = load(store)
    if files.pop(str(real_path(path)), None) is None:
        return False
    _save(store, files)
    return True
