"""What `openheim mcp`, ``OpenheimClient.mcp_servers()`` and front ends show about one MCP server."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class McpServerStatus:
    name: str
    transport: str  # stdio | http | unknown
    source: str  # config | mcp-config | project | session
    state: str  # starting | connected | disconnected | failed | closed | untrusted | needs login
    connected: bool
    tool_count: int
    error: str | None = None
    command: str | None = None  # stdio: the program (arguments are never shown: they may hold secrets)
    url: str | None = None  # http: scrubbed of userinfo, query and fragment
    tools: tuple[str, ...] = ()  # exposed names (server__tool)
    tools_left_out: tuple[str, ...] = ()  # its tools over the per-server budget (mcp/tool_budget.py), not offered
    prompts: tuple[str, ...] = ()  # its prompts' names
    resources: bool = False  # it lists resources (or resource templates)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["tools"] = list(self.tools)
        data["tools_left_out"] = list(self.tools_left_out)
        data["prompts"] = list(self.prompts)
        return {k: v for k, v in data.items() if v is not None}
