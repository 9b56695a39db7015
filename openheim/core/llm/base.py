"""The LlmClient protocol: one streaming call per model request."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from openheim.core.models import Choice, Message, Tool
    from openheim.core.turn_context import CancelToken


class Chunk(NamedTuple):
    """A streamed fragment: ``kind`` is "text" or "thinking" (a NamedTuple: one is made per streamed piece)."""

    kind: str
    text: str


OnChunk = Callable[[Chunk], None]


class LlmClient(Protocol):
    """A model endpoint. ``stream`` blocks until the reply is complete, calling ``on_chunk``
    for every text/thinking fragment as it arrives, and returns the assembled reply.

    Raises ContextOverflow, HttpError, IncompleteResponse, TransportError, ApiError or
    Cancelled (when ``cancel`` fires: the blocked read must return within 200 ms).
    """

    @property
    def provider_name(self) -> str: ...  # a plain attribute satisfies this

    @property
    def model(self) -> str: ...

    def stream(self, messages: list[Message], tools: list[Tool], on_chunk: OnChunk, cancel: CancelToken) -> Choice: ...
