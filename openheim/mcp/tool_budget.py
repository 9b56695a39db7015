"""What one MCP server may add to every model request: at most MAX_TOOLS tools and MAX_TOOL_BYTES of
their definitions (name, description and input schema, as JSON). Tools are taken in the server's order;
one that does not fit is left out and later, smaller ones still may be. What was left out is named
once in a warning line and in the server's status (`openheim mcp`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

MAX_TOOLS = 200  # tools of one server offered to the model
MAX_TOOL_BYTES = 256 << 10  # bytes of one server's tool definitions offered to the model
SHOWN = 8  # left-out names a notice spells out


@dataclass(frozen=True)
class Budgeted:
    """The tool definitions kept (in order) and the names of those left out."""

    kept: list[dict]
    left_out: list[str] = field(default_factory=list)


def definition_bytes(spec: dict) -> int:
    """What a tool costs in every request: its name, description and schema as JSON."""
    try:
        return len(json.dumps([spec.get("name"), spec.get("description"), spec.get("inputSchema")]))
    except (TypeError, ValueError, RecursionError):
        return MAX_TOOL_BYTES + 1  # not JSON: never offered


def within_budget(specs: list[dict], max_tools: int = MAX_TOOLS, max_bytes: int = MAX_TOOL_BYTES) -> Budgeted:
    """The tools that fit the budget, in the server's order, and the names of the rest."""
    kept: list[dict] = []
    left_out: list[str] = []
    used = 0
    for spec in specs:
        size = definition_bytes(spec)
        if len(kept) < max_tools and used + size <= max_bytes:
            kept.append(spec)
            used += size
        else:
            left_out.append(str(spec.get("name", "?")))
    return Budgeted(kept, left_out)


def notice(server: str, offered: int, left_out: list[str]) -> str:
    """The one line saying which tools of ``server`` the model does not see, and why."""
    shown = ", ".join(left_out[:SHOWN]) + (f" and {len(left_out) - SHOWN} more" if len(left_out) > SHOWN else "")
    return (
        f"MCP server '{server}' offers {offered} tools; {len(left_out)} are left out ({shown}): at most "
        f"{MAX_TOOLS} tools and {MAX_TOOL_BYTES >> 10} KiB of tool definitions per server go to the model "
        f"(`openheim mcp --json` lists them)"
    )
