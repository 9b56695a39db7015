"""Which project ``.mcp.json`` files the user trusts (``openheim mcp trust``), kept in
``{data_dir}/mcp-trust.json`` by the shared store in ``openheim.config.trust``."""

from __future__ import annotations

from pathlib import Path

from openheim.config import trust as store
from openheim.config.mcp_json import server_files
from openheim.config.trust import digest, real_path

TRUST_FILE = "mcp-trust.json"
__all__ = ["TRUST_FILE", "check", "check_detail", "digest", "load", "real_path", "trust", "untrust"]


def load(data_dir: Path) -> dict[str, dict]:
    return store.load(data_dir / TRUST_FILE)


def check(data_dir: Path, path: Path, sha256: str) -> str:
    """``trusted``, ``changed`` (trusted with other content) or ``untrusted``."""
    return store.check(data_dir / TRUST_FILE, path, sha256)


def check_detail(data_dir: Path, path: Path, sha256: str) -> tuple[str, str | None]:
    """``check``, and the script a server runs that changed since the file was trusted, if that is why."""
    return store.check_detail(data_dir / TRUST_FILE, path, sha256)


def trust(data_dir: Path, path: Path) -> str:
    """Record ``path`` with its current content and the workspace files its servers run; returns the
    content's SHA-256."""
    return store.trust(data_dir / TRUST_FILE, path, lambda raw: server_files(raw, real_path(path).parent))


def untrust(data_dir: Path, path: Path) -> bool:
    """Forget ``path``; False when it was not trusted."""
    return store.untrust(data_dir / TRUST_FILE, path)
