"""Reading what an MCP server sends, bounded and forgiving (pure functions; the transports do the I/O).

- ``LineReader``: newline-delimited messages from byte chunks; a line over the size limit is skipped
  as it streams by (never held whole), keeping only its head and tail to find the request it answers.
- ``refusal``: the JSON-RPC error that stands in for an oversized response, so its caller fails at once.
- ``usable_tools``: a tools/list result with the tools whose definition is invalid left out, one by one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

DEFAULT_MAX_MESSAGE = 8 << 20  # bytes: a bigger message from a server is refused
_KEEP = 4096  # bytes of an oversized line's head and tail kept to find its id
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


@dataclass(frozen=True)
class Oversized:
    """A line longer than the limit: its size and the JSON-RPC id it seems to carry (None: not found)."""

    size: int
    request_id: int | str | None


class LineReader:
    """Feed chunks, get complete lines (bytes, without the newline) or ``Oversized`` markers."""

    def __init__(self, max_line: int = DEFAULT_MAX_MESSAGE) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._skipping = False
        self._skipped = 0
        self._head = b""
        self._tail = b""

    def feed(self, chunk: bytes) -> Iterator[bytes | Oversized]:
        while chunk:
            if self._skipping:
                end = chunk.find(b"\n")
                part = chunk if end < 0 else chunk[:end]
                self._skipped += len(part)
                self._tail = (self._tail + part)[-_KEEP:]
                if end < 0:
                    return
                chunk = chunk[end + 1 :]
                yield Oversized(self._skipped, _id_of(self._head, self._tail))
                self._skipping, self._skipped, self._head, self._tail = False, 0, b"", b""
                continue
            end = chunk.find(b"\n")
            if end < 0:
                self._buffer += chunk
                if len(self._buffer) > self.max_line:
                    self._start_skipping()
                return
            if len(self._buffer) + end > self.max_line:
                head = (bytes(self._buffer[:_KEEP]) + chunk[:_KEEP])[:_KEEP]
                tail = (bytes(self._buffer[-_KEEP:]) + chunk[max(0, end - _KEEP) : end])[-_KEEP:]
                yield Oversized(len(self._buffer) + end, _id_of(head, tail))
                self._buffer.clear()
            else:
                line = bytes(self._buffer) + chunk[:end]
                self._buffer.clear()
                yield line
            chunk = chunk[end + 1 :]

    def _start_skipping(self) -> None:
        data = bytes(self._buffer)
        self._buffer.clear()
        self._skipping, self._skipped = True, len(data)
        self._head, self._tail = data[:_KEEP], data[-_KEEP:]


def _id_of(head: bytes, tail: bytes) -> int | str | None:
    """The id of a message from its first and last bytes (servers usually write it first)."""
    found = _find_id(head)
    return found if found is not None else _find_id(tail)


def _find_id(data: bytes) -> int | str | None:
    match = _ID.search(data)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    return value if isinstance(value, (int, str)) else None


def refusal(request_id: int | str, size: int, limit: int, server: str) -> dict:
    """The error response that replaces an oversized one (code -32603, internal error)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": -32603,
            "message": f"MCP server '{server}' sent a message of {size >> 20} MiB, over the "
            f"{limit >> 20} MiB limit (mcp_max_message_mib); it was refused",
        },
    }


def usable_tools(result: dict, valid: Callable[[dict], str | None], warn: Callable[[str], None]) -> dict:
    """``result`` (a tools/list result) without the tools ``valid`` finds a problem with (one ``warn`` each)."""
    tools = result.get("tools")
    if not isinstance(tools, list):
        return result
    kept = []
    for tool in tools:
        problem = tool_problem(tool) or valid(tool)
        if problem is None:
            kept.append(tool)
        else:
            name = tool.get("name") if isinstance(tool, dict) else None
            warn(f"tool '{name if isinstance(name, str) else '?'}' is left out: {problem}")
    return {**result, "tools": kept}


def tool_problem(tool: object) -> str | None:
    """What makes a tool definition unusable for a model, or None."""
    if not isinstance(tool, dict):
        return "its definition is not an object"
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        return "it has no name"
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return "its inputSchema is not a JSON object"
    if schema.get("type", "object") != "object":
        return f'its inputSchema has type {json.dumps(schema.get("type"))[:40]}, not "object"'
    properties = schema.get("properties")
    if properties is not None and not isinstance(properties, dict):
        return "its inputSchema's properties is not an object"
    return None
