"""The built-in tools every session gets (execute_command only when allow_shell is on)."""
from __future__ import annotations

from openheim.core.tools import ToolRegistry
from openheim.sandbox.policy import Sandbox
from openheim.tools.edit_file import EditFileTool
from openheim.tools.list_dir import ListDirTool
from openheim.tools.plan import UpdatePlanTool
from openheim.tools.process import deny_inspection
from openheim.tools.read_file import ReadFileTool
from openheim.tools.search import SearchTool
from openheim.tools.web_fetch import Resolver, WebFetchTool
from openheim.tools.write_file import WriteFileTool


def register_builtins(registry: ToolRegistry, *, allow_shell: bool, resolver: Resolver | None = None,
                      sandbox: Sandbox | None = None) -> None:
    """Add read_file, write_file, edit_file, list_dir, search, web_fetch, update_plan (+ execute_command).

    Also makes this process non-dumpable before any tool can run, so the children tools start
    (shells, ripgrep, MCP servers) cannot read its environment or memory (see deny_inspection).
    """
    deny_inspection()
    for tool in (ReadFileTool(), WriteFileTool(), EditFileTool(), ListDirTool(), SearchTool(),
                 WebFetchTool(resolver), UpdatePlanTool()):
        registry.register(tool)
    if allow_shell:
        from openheim.sandbox.support import announce
        from openheim.tools.execute_command import ExecuteCommandTool

        sandbox = sandbox or Sandbox()
        announce(sandbox)
        registry.register(ExecuteCommandTool(sandbox=sandbox))
