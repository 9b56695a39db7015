"""The ``mcpServers`` array of session/new, load and resume, as server configs for the client.

stdio entries (no ``type``, or ``"stdio"``), ``"http"`` and ``"sse"`` entries are used; a malformed entry
is left out: each with one warning on stderr, never a failed session.
"""

from __future__ import annotations

import logging

from openheim.acp.util import invalid_params
from openheim.client import mcp_server_configs
from openheim.errors import ConfigError

log = logging.getLogger(__name__)


def mcp_servers(params: dict, allow_commands: bool = True) -> list:
    """The usable servers of ``params["mcpServers"]`` (an array; absent or null means none).

    Without ``allow_commands`` (a network client of `openheim serve`) a stdio entry, which would run a
    command on this machine, fails the request with invalid params; http entries stay allowed.
    """

    entries = params.get("mcpServers", [])
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise invalid_params("'mcpServers' must be an array")
    if not allow_commands:
        _refuse_commands(entries)
    servers, names = [], set()
    for index, entry in enumerate(entries):
        try:
            table = _table(entry)
            if table["name"] in names:
                raise ConfigError(f"a server named '{table['name']}' is listed twice; the first is used")
            servers.extend(mcp_server_configs([table]))
            names.add(table["name"])
        except (ConfigError, ValueError) as e:
            message = e.message if isinstance(e, ConfigError) else str(e)
            log.warning("MCP server #%d from the client is not used: %s", index + 1, message)
    return servers


def _refuse_commands(entries: list) -> None:
    for entry in entries:
        if isinstance(entry, dict) and (entry.get("type") or "stdio") == "stdio":
            name = entry.get("name")
            shown = f"'{name}'" if isinstance(name, str) else "a stdio entry"
            raise invalid_params(
                f"MCP server {shown} would run a command on the server's machine, which this "
                "server does not allow for its clients; use an http MCP server, or set "
                "[serve] allow_client_mcp_commands = true on the server"
            )


def _table(entry: object) -> dict:
    if not isinstance(entry, dict):
        raise ValueError("it is not a JSON object")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("it has no 'name'")
    kind = entry.get("type") or "stdio"
    if kind == "stdio":
        return {
            "name": name,
            "command": entry.get("command"),
            "args": entry.get("args") or [],
            "env": _pairs(entry.get("env"), "env"),
        }
    if kind == "http":
        return {"name": name, "url": entry.get("url"), "headers": _pairs(entry.get("headers"), "headers")}
    if kind == "sse":
        return {
            "name": name,
            "url": entry.get("url"),
            "headers": _pairs(entry.get("headers"), "headers"),
            "transport": "sse",
        }
    raise ValueError(f"'{name}' has an unknown type '{kind}'")


def _pairs(value: object, field: str) -> dict:
    """ACP's ``[{"name": ..., "value": ...}]`` (a plain object is accepted too)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if not isinstance(value, list):
        raise ValueError(f"'{field}' must be an array of {{name, value}}")
    pairs = {}
    for item in value:
        if not (isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str)):
            raise ValueError(f'\'{field}\' entries must be {{"name": string, "value": string}}')
        pairs[item["name"]] = item["value"]
    return pairs
