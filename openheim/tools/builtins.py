"""The built-in tools every session gets (execute_command only when allow_shell is on).

They are listed from their specs (tools/specs.py): a prompt that calls no tool imports no tool
implementation. A tool's module is imported on its first call (or when a call is shown), and before
that the process is made non-dumpable, so the children tools start (shells, ripgrep) cannot read its
environment or memory (see tools/process.py deny_inspection).
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, Any

from openheim.core.tools import BaseTool, ToolRegistry
from openheim.tools.specs import ALWAYS, EXECUTE_COMMAND, WEB_FETCH, ToolSpec

if TYPE_CHECKING:
    from openheim.core.tools import ToolHandler, ToolView, ViewContext
    from openheim.core.turn_context import TurnContext
    from openheim.sandbox.policy import Sandbox
    from openheim.tools.web_fetch import Resolver


class LazyTool(BaseTool):
    """A built-in tool listed from its spec; its implementation is built on first use."""

    def __init__(self, spec: ToolSpec, **options: Any) -> None:
        self.spec, self.options = spec, options
        self.name, self.description, self.parameters, self.capabilities = spec.fields()
        self.loaded: ToolHandler | None = None
        self.lock = threading.Lock()

    def implementation(self) -> ToolHandler:
        with self.lock:
            if self.loaded is None:
                from openheim.tools.process import deny_inspection

                deny_inspection()
                module, _, name = self.spec.implementation.partition(":")
                self.loaded = getattr(importlib.import_module(module), name)(**self.options)
            return self.loaded

    def execute(self, args: dict, ctx: TurnContext) -> str:
        return self.implementation().execute(args, ctx)

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        return self.implementation().present(args, where)


def register_builtins(
    registry: ToolRegistry, *, allow_shell: bool, resolver: Resolver | None = None, sandbox: Sandbox | None = None
) -> None:
    """Add read_file, write_file, edit_file, list_dir, search, web_fetch, update_plan (+ execute_command, in
    ``sandbox``)."""
    for spec in ALWAYS:
        registry.register(LazyTool(spec, resolver=resolver) if spec is WEB_FETCH else LazyTool(spec))
    if allow_shell:
        from openheim.sandbox.policy import Sandbox
        from openheim.sandbox.support import announce

        sandbox = sandbox or Sandbox()
        announce(sandbox)
        registry.register(LazyTool(EXECUTE_COMMAND, sandbox=sandbox))
