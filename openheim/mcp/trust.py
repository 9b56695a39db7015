"""Which project ``.mcp.json`` files the user trusts: their real path and a SHA-256 of their content.

A project's ``.mcp.json`` runs commands from whatever repository was cloned, so it is used only after
``openheim mcp trust`` recorded it; any change to the file needs trusting again.
Stored in ``{data_dir}/mcp-trust.json`` as ``{"files": {path: {"sha256": ..., "trusted_at": ...}}}``.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

from openheim.errors import ConfigError

TRUST_FILE = "mcp-trust.json"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def real_path(path: str | Path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def _store(data_dir: Path) -> Path:
    return data_dir / TRUST_FILE


def load(data_dir: Path) -> dict[str, dict]:
    """The trusted files by real path (an unreadable store trusts nothing)."""
    try:
        data = json.loads(_store(data_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return {k: v for k, v in files.items() if isinstance(v, dict)} if isinstance(files, dict) else {}


def check(data_dir: Path, path: Path, sha256: str) -> str:
    """``trusted``, ``changed`` (trusted with other content) or ``untrusted``."""
    entry = load(data_dir).get(str(real_path(path)))
    if entry is None:
        return "untrusted"
    return "trusted" if entry.get("sha256") == sha256 else "changed"


def _save(data_dir: Path, files: dict[str, dict]) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".mcp-trust.", dir=data_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"files": files}, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, _store(data_dir))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def trust(data_dir: Path, path: Path) -> str:
    """Record ``path`` with its current content; returns the content's SHA-256."""
    real = real_path(path)
    try:
        sha = digest(real.read_bytes())
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    files = load(data_dir)
    files[str(real)] = {"sha256": sha, "trusted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    _save(data_dir, files)
    return sha


def untrust(data_dir: Path, path: Path) -> bool:
    """Forget ``path``; False when it was not trusted."""
    files = load(data_dir)
    if files.pop(str(real_path(path)), None) is None:
        return False
    _save(data_dir, files)
    return True
