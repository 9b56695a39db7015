"""An in-process scripted LlmClient and a trivial tool, for loop tests that need no socket."""

from __future__ import annotations

import json
import threading

from openheim.core.llm.base import Chunk
from openheim.core.models import (
    Choice,
    FinishReason,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
)
from openheim.core.tools import BaseTool, ToolCapabilities
from openheim.errors import Cancelled, ContextOverflow


class ScriptedLlm:
    """Replies from a script; records what each call was sent. A reply is a Choice or an exception."""

    provider_name = "fake"
    model = "fake-model"

    def __init__(self, replies: list) -> None:
        self.replies = list(replies)
        self.sent: list[list[Message]] = []
        self.block = threading.Event()

    def stream(self, messages, tools, on_chunk, cancel) -> Choice:
        self.sent.append(list(messages))
        reply = self.replies.pop(0) if self.replies else text_reply("echo")
        if reply == "block":
            cancel.wait(10)
            raise Cancelled()
        if isinstance(reply, Exception):
            raise reply
        for block in reply.message.content:
            if isinstance(block, ThinkingBlock):
                on_chunk(Chunk("thinking", block.thinking))
            if isinstance(block, TextBlock):
                on_chunk(Chunk("text", block.text))
        return reply


def text_reply(text: str, finish: FinishReason = FinishReason.STOP, usage: Usage | None = None) -> Choice:
    return Choice(Message.assistant(text), finish, usage=usage)


def tool_reply(*calls: tuple[str, object], finish: FinishReason = FinishReason.TOOL_CALLS) -> Choice:
    blocks = [
        ToolUseBlock(f"call_{i}", name, args if isinstance(args, str) else json.dumps(args))
        for i, (name, args) in enumerate(calls)
    ]
    return Choice(Message("assistant", blocks), finish)


class EchoTool(BaseTool):
    """Returns its ``text`` argument; ``fail`` raises a tool error; ``wait`` blocks until cancelled."""

    name = "echo"
    description = "Echo the text back."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}}
    capabilities = ToolCapabilities(read_only=True, kind="other")

    def execute(self, args: dict, ctx) -> str:
        from openheim.errors import ToolExecutionError

        if args.get("fail"):
            raise ToolExecutionError("asked to fail")
        if args.get("wait"):
            ctx.cancel.wait(10)
            return "woke"
        return str(args.get("text", ""))


class WriteTool(EchoTool):
    name = "poke"
    capabilities = ToolCapabilities(read_only=False, kind="edit")


def overflow() -> ContextOverflow:
    return ContextOverflow("prompt is too long")
