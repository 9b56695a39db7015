"""Custom providers that only answer whole replies: a blocking ``send`` gets a streaming wrapper."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

from openheim.core.llm.base import Chunk
from openheim.core.models import TextBlock, ThinkingBlock
from openheim.errors import Cancelled

if TYPE_CHECKING:
    from openheim.core.llm.base import LlmClient, OnChunk
    from openheim.core.models import Choice, Message, Tool
    from openheim.core.turn_context import CancelToken


class BlockingLlm(Protocol):
    """The simplest provider: one whole reply per call."""

    def send(self, messages: list[Message], tools: list[Tool]) -> Choice: ...


class SendOnlyClient:
    """An LlmClient around ``send``: the reply is delivered as one chunk; cancel returns at once."""

    def __init__(self, inner: BlockingLlm, provider_name: str = "custom", model: str = "custom") -> None:
        self.inner = inner
        self.provider_name = getattr(inner, "provider_name", provider_name)
        self.model = getattr(inner, "model", model)

    def stream(self, messages: list[Message], tools: list[Tool], on_chunk: OnChunk, cancel: CancelToken) -> Choice:
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def call() -> None:
            try:
                outcome["choice"] = self.inner.send(messages, tools)
            except BaseException as e:  # handed to the waiting thread
                outcome["error"] = e
            done.set()

        if cancel.cancelled:
            raise Cancelled()
        threading.Thread(target=call, name="openheim-send", daemon=True).start()
        remove = cancel.on_cancel(done.set)
        done.wait()
        remove()
        if cancel.cancelled:
            raise Cancelled()
        if "error" in outcome:
            raise outcome["error"]
        choice = outcome["choice"]
        for block in choice.message.content:
            if isinstance(block, ThinkingBlock) and block.thinking:
                on_chunk(Chunk("thinking", block.thinking))
            elif isinstance(block, TextBlock) and block.text:
                on_chunk(Chunk("text", block.text))
        return choice


def as_llm_client(provider: object) -> LlmClient:
    """``provider`` as an LlmClient: one with ``stream`` as it is, one with only ``send`` wrapped."""
    if callable(getattr(provider, "stream", None)):
        return provider  # type: ignore[return-value]
    if callable(getattr(provider, "send", None)):
        return SendOnlyClient(provider)  # type: ignore[arg-type]
    raise TypeError(
        f"{type(provider).__name__} is not an LLM client: implement stream(messages, tools, on_chunk, "
        "cancel) -> Choice, or send(messages, tools) -> Choice"
    )
