"""Each MCP server's last tool list, remembered in the data dir so a session offers its tools from the
first model request while the server is still starting.

Keyed by a digest of the server's config entry (name, transport, command, args, env, url, headers, cwd),
so a changed entry starts from nothing; the entry itself (which may hold secrets) is never stored.
Stored in ``{data_dir}/mcp-tools.json`` as ``{"servers": {key: {"name": ..., "tools": [specs]}}}``; an entry
may also hold ``"resources"`` (whether the server lists any) and ``"prompts"`` (its prompts/list).
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.config.atomic import replace_text

if TYPE_CHECKING:
    from openheim.config.schema import McpServerConfig

KNOWN_FILE = "mcp-tools.json"
MAX_REMEMBERED = 1 << 20  # bytes of tool specs kept for one server; a larger list is not remembered
_lock = threading.Lock()


def entry_key(config: McpServerConfig) -> str:
    """A stable digest of everything that decides which server runs and where."""
    entry = {
        "name": config.name,
        "command": config.command,
        "args": list(config.args),
        "env": dict(config.env),
        "url": config.url,
        "sse": config.sse,
        "headers": dict(config.headers),
        "cwd": str(config.cwd) if config.cwd else None,
    }
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()


def _load(data_dir: Path) -> dict[str, dict]:
    try:
        data = json.loads((data_dir / KNOWN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    servers = data.get("servers") if isinstance(data, dict) else None
    return {k: v for k, v in servers.items() if isinstance(v, dict)} if isinstance(servers, dict) else {}


def recall(data_dir: Path, config: McpServerConfig) -> list[dict] | None:
    """The tool specs remembered for this config entry, or None when it was never seen connected."""
    tools = _load(data_dir).get(entry_key(config), {}).get("tools")
    return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else None


def recall_extras(data_dir: Path, config: McpServerConfig) -> dict:
    """What else is remembered of this entry: ``resources`` (bool) and ``prompts`` (specs), when stored."""
    entry = _load(data_dir).get(entry_key(config), {})
    extras: dict = {}
    if isinstance(entry.get("resources"), bool):
        extras["resources"] = entry["resources"]
    prompts = entry.get("prompts")
    if isinstance(prompts, list):
        extras["prompts"] = [p for p in prompts if isinstance(p, dict) and isinstance(p.get("name"), str)]
    return extras


def remember(data_dir: Path, config: McpServerConfig, specs: list[dict], extras: dict | None = None) -> None:
    """Store ``specs`` (and ``extras``: resources, prompts) for this entry when they differ from what is
    stored; other keys of the entry are kept (best effort: I/O errors pass)."""
    if len(json.dumps([specs, extras])) > MAX_REMEMBERED:
        return
    key = entry_key(config)
    with _lock:
        servers = _load(data_dir)
        old = servers.get(key, {})
        new = {**old, "name": config.name, "tools": specs, **(extras or {})}
        if old == new:
            return
        servers[key] = new
        try:
            _save(data_dir, servers)
        except OSError:
            pass


def _save(data_dir: Path, servers: dict[str, dict]) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    replace_text(data_dir / KNOWN_FILE, json.dumps({"servers": servers}, ensure_ascii=False))
