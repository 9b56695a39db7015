"""openheim: a multi-provider LLM agent runtime built around the Agent Client Protocol.

Public names are resolved lazily so ``import openheim`` costs almost nothing.
"""
from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "OpenheimClient": "openheim.client",
    "SessionHandle": "openheim.client",
    "ToolHandler": "openheim.core.tools",
    "ToolCapabilities": "openheim.core.tools",
    "BaseTool": "openheim.core.tools",
    "tool": "openheim.core.function_tool",
    "FunctionTool": "openheim.core.function_tool",
    "TurnContext": "openheim.core.turn",
    "CancelToken": "openheim.core.turn",
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
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    import importlib

    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'openheim' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
