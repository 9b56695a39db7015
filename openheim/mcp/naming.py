"""How an MCP tool is named for the model: ``{server}__{tool}``, sanitised, at most 64 characters."""

from __future__ import annotations

import re

MAX_NAME = 64
_KEEP = MAX_NAME - 9  # room for "_" and eight hex digits
_SERVER_BAD = re.compile(r"[^A-Za-z0-9_]")
_TOOL_BAD = re.compile(r"[^A-Za-z0-9_-]")

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


def fnv1a64(data: bytes) -> int:
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def exposed_name(server: str, tool: str) -> str:
    """Server chars outside [A-Za-z0-9_] and tool chars outside [A-Za-z0-9_-] become ``_``; a leading digit
    gets a ``_`` prefix; a name over 64 characters keeps 55 and ends with ``_`` + 8 hex digits of the
    low 32 bits of FNV-1a 64 over the original ``server__tool`` (stable across runs)."""
    name = f"{_SERVER_BAD.sub('_', server)}__{_TOOL_BAD.sub('_', tool)}"
    if name[:1].isdigit():
        name = "_" + name
    if len(name) > MAX_NAME:
        digest = fnv1a64(f"{server}__{tool}".encode()) & 0xFFFFFFFF
        name = f"{name[:_KEEP]}_{digest:08x}"
    return name
