"""The ``mcpServers`` JSON used across the field (Claude Code's ``.mcp.json``, Cursor, Cline, ...), read as-is.

    {"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
                    "docs": {"type": "http", "url": "https://example.com/mcp",
                             "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}}}

``type`` may be absent (a ``url`` without a ``command`` is then HTTP) or ``stdio``; ``http`` (also
``streamable-http``/``streamableHttp``) for streamable HTTP; ``sse`` for the older HTTP+SSE transport.
``"disabled": true`` skips an entry.
``${VAR}`` and ``${VAR:-default}`` in command, args, env, url and headers are read from the environment.
Other keys are ignored.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

from openheim.config.bounded_read import read_bounded
from openheim.config.named_files import command_files
from openheim.config.schema import McpServerConfig, parse_mcp_server
from openheim.errors import ConfigError

log = logging.getLogger(__name__)

MAX_MCP_FILE_BYTES = 1 << 20
_HTTP_TYPES = {"http", "streamable-http", "streamablehttp", "streamable_http"}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_vars(text: str, name: str, env: dict[str, str] | None = None) -> str:
    """``${VAR}`` / ``${VAR:-default}`` from ``env`` (default: the process environment)."""
    values: Mapping[str, str] = os.environ if env is None else env

    def one(m: re.Match) -> str:
        value = values.get(m.group(1))
        if value:
            return value
        if m.group(2) is not None:
            return m.group(2)
        if value is not None:
            return value
        raise ConfigError(
            f"MCP server '{name}' uses ${{{m.group(1)}}}, which is not set; set it or give a "
            f"default as ${{{m.group(1)}:-value}}"
        )

    return _VAR.sub(one, text)


def variables_read(entry: object) -> dict[str, list[str]]:
    """Which ``${VAR}``s an entry reads, by place: ``command``, ``args``, ``url``, ``env NAME``, ``headers NAME``."""
    if not isinstance(entry, dict):
        return {}
    places: dict[str, list[str]] = {}

    def note(place: str, value: object) -> None:
        names = _VAR.findall(value) if isinstance(value, str) else []
        if names:
            places.setdefault(place, []).extend(n for n, _ in names)

    note("command", entry.get("command"))
    note("url", entry.get("url"))
    for arg in entry.get("args") or [] if isinstance(entry.get("args"), list) else []:
        note("args", arg)
    for table in ("env", "headers"):
        values = entry.get(table)
        if isinstance(values, dict):
            for key, value in values.items():
                note(f"{table} {key}", value)
    return places


def server_from_entry(name: str, entry: object, where: str) -> McpServerConfig | None:
    """One ``mcpServers`` entry as a server config; None when it is disabled."""
    if not isinstance(entry, dict):
        raise ConfigError(f"MCP server '{name}' in {where} must be a JSON object")
    if entry.get("disabled") is True:
        return None
    default = "http" if entry.get("url") and not entry.get("command") else "stdio"  # Cursor: a bare url
    kind = str(entry.get("type") or default).strip().lower()
    if kind not in _HTTP_TYPES and kind not in ("stdio", "sse"):
        raise ConfigError(f"MCP server '{name}' in {where} has an unknown type '{kind}'; use stdio, http or sse")
    table: dict = {}
    if kind == "stdio":
        for key in ("command", "args", "env"):
            if key in entry:
                table[key] = entry[key]
    else:
        for key in ("url", "headers"):
            if key in entry:
                table[key] = entry[key]
        if "url" not in table:
            raise ConfigError(f"MCP server '{name}' in {where} has type '{kind}' but no 'url'")
        if kind == "sse":
            table["transport"] = "sse"
    if "tool_timeout_secs" in entry:
        table["tool_timeout_secs"] = entry["tool_timeout_secs"]
    table = _expand(table, name)
    return parse_mcp_server(name, table, section=f"mcpServers.{name} in {where}")


def _expand(table: dict, name: str) -> dict:
    out = dict(table)
    for key in ("command", "url"):
        if isinstance(out.get(key), str):
            out[key] = expand_vars(out[key], name)
    if isinstance(out.get("args"), list):
        out["args"] = [expand_vars(a, name) if isinstance(a, str) else a for a in out["args"]]
    for key in ("env", "headers"):
        if isinstance(out.get(key), dict):
            out[key] = {k: expand_vars(v, name) if isinstance(v, str) else v for k, v in out[key].items()}
    return out


def parse_mcp_json(text: str, where: str) -> tuple[dict[str, McpServerConfig], list[str]]:
    """The servers of an ``mcpServers`` document and the problems of the entries that were left out.

    A document that is not JSON, or has no ``mcpServers`` object, is a ConfigError.
    """
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{where} is not valid JSON: {e}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f'{where} has no "mcpServers" object')
    found: dict[str, McpServerConfig] = {}
    problems: list[str] = []
    for name, entry in servers.items():
        try:
            server = server_from_entry(str(name), entry, where)
        except ConfigError as e:
            problems.append(e.message)
            continue
        if server is not None:
            found[server.name] = server
    return found, problems


def load_mcp_file(path: str | Path, source: str) -> dict[str, McpServerConfig]:
    """An explicit ``--mcp-config`` file: every problem is a ConfigError."""
    p = Path(path).expanduser()
    try:
        text = read_bounded(p, MAX_MCP_FILE_BYTES).decode("utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read MCP config {p}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p} is not valid UTF-8 text") from None
    servers, problems = parse_mcp_json(text, str(p))
    for problem in problems:  # the rest of the file loads
        log.warning("%s; that server is left out", problem)
    for server in servers.values():
        server.source = source
    return servers


def server_files(raw: bytes, project: Path) -> list[Path]:
    """The files inside ``project`` that the stdio servers of an ``mcpServers`` document name in ``command``
    and ``args``: trusting the document pins them too (``config.trust``)."""
    try:
        entries = json.loads(raw).get("mcpServers")
    except (ValueError, AttributeError, RecursionError):
        return []
    words: list[str] = []
    for entry in entries.values() if isinstance(entries, dict) else ():
        if isinstance(entry, dict) and isinstance(entry.get("command"), str):
            args = entry.get("args")
            words += [entry["command"], *(a for a in (args if isinstance(args, list) else []) if isinstance(a, str))]
    return command_files(words, project)
