"""openheim: a multi-provider LLM agent runtime built around the Agent Client Protocol.

Public names are resolved lazily so ``import openheim`` costs almost nothing.
"""

from __future__ import annotations

from openheim.version import __version__

_LAZY = {
    "OpenheimClient": "openheim.client",
    "Session": "openheim.runtime.session",
    "ToolHandler": "openheim.core.tools",
    "ToolCapabilities": "openheim.core.tools",
    "BaseTool": "openheim.core.tools",
    "tool": "openheim.core.function_tool",
    "FunctionTool": "openheim.core.function_tool",
    "TurnContext": "openheim.core.turn_context",
    "CancelToken": "openheim.core.turn_context",
    "ClientIo": "openheim.core.client_io",
    "FailClosedGate": "openheim.core.permission",
    "AllowAll": "openheim.core.permission",
    "PermissionRequest": "openheim.core.permission",
    "Choice": "openheim.core.models",
    "AgentResult": "openheim.core.models",
    "Usage": "openheim.core.models",
    "EmbeddingClient": "openheim.memory.embedding",
    "LongTermMemory": "openheim.memory.long_term",
    "ToolView": "openheim.core.tools",
    "Turn": "openheim.runtime.turn",
    "LlmClient": "openheim.core.llm.base",
    "PermissionGate": "openheim.core.permission",
    "Decision": "openheim.core.permission",
    "StreamEvent": "openheim.core.events",
    "Message": "openheim.core.models",
    "StopReason": "openheim.core.models",
    "OpenheimError": "openheim.errors",
    "serve_acp": "openheim.acp.server",
}

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing would cost every start-up
if TYPE_CHECKING:  # what type checkers see; at run time the names resolve lazily below
    from openheim.acp.server import serve_acp as serve_acp
    from openheim.client import OpenheimClient as OpenheimClient
    from openheim.core.client_io import ClientIo as ClientIo
    from openheim.core.events import StreamEvent as StreamEvent
    from openheim.core.function_tool import FunctionTool as FunctionTool
    from openheim.core.function_tool import tool as tool
    from openheim.core.llm.base import LlmClient as LlmClient
    from openheim.core.models import AgentResult as AgentResult
    from openheim.core.models import Choice as Choice
    from openheim.core.models import Message as Message
    from openheim.core.models import StopReason as StopReason
    from openheim.core.models import Usage as Usage
    from openheim.core.permission import AllowAll as AllowAll
    from openheim.core.permission import Decision as Decision
    from openheim.core.permission import FailClosedGate as FailClosedGate
    from openheim.core.permission import PermissionGate as PermissionGate
    from openheim.core.permission import PermissionRequest as PermissionRequest
    from openheim.core.tools import BaseTool as BaseTool
    from openheim.core.tools import ToolCapabilities as ToolCapabilities
    from openheim.core.tools import ToolHandler as ToolHandler
    from openheim.core.tools import ToolView as ToolView
    from openheim.core.turn_context import CancelToken as CancelToken
    from openheim.core.turn_context import TurnContext as TurnContext
    from openheim.errors import OpenheimError as OpenheimError
    from openheim.memory.embedding import EmbeddingClient as EmbeddingClient
    from openheim.memory.long_term import LongTermMemory as LongTermMemory
    from openheim.runtime.session import Session as Session
    from openheim.runtime.turn import Turn as Turn

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    import importlib

    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'openheim' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
