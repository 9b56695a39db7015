"""RetryClient: retries a failed model request with backoff, but never once output reached the caller."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from openheim.errors import (
    ApiError,
    Cancelled,
    ContextOverflow,
    HttpError,
    IncompleteResponse,
    OpenheimError,
    TransportError,
)

if TYPE_CHECKING:
    from openheim.core.llm.base import Chunk, LlmClient, OnChunk
    from openheim.core.models import Choice, Message, Tool
    from openheim.core.turn import CancelToken

log = logging.getLogger(__name__)

MAX_RETRIES = 3
BASE_DELAY = 1.0
MAX_WAIT = 60.0
_RETRY_STATUSES = frozenset({408, 409, 425, 429})
_QUOTA_MARKERS = ("insufficient_quota", "billing", "perday", "per_day", "credits")


def is_quota_exhausted(e: HttpError) -> bool:
    """A 402, or a 429 that says the account is out of quota (waiting will not help)."""
    if e.status == 402:
        return True
    return e.status == 429 and any(m in e.body.lower() for m in _QUOTA_MARKERS)


def is_retryable(e: BaseException) -> bool:
    """Whether another attempt could succeed."""
    if isinstance(e, ContextOverflow):
        return False
    if isinstance(e, HttpError):
        if is_quota_exhausted(e):
            return False
        return e.status in _RETRY_STATUSES or e.status >= 500
    if isinstance(e, ApiError):
        return e.retryable
    return isinstance(e, (TransportError, IncompleteResponse))


def wait_too_long(e: HttpError, seconds: float) -> HttpError:
    """The error for a server that asked for a longer pause than we are willing to take."""
    return HttpError(e.status, f"rate limited: the provider asked to wait {seconds:.0f} s; try again later",
                     seconds)


class RetryClient:
    """Wraps an LlmClient: up to ``max_retries`` more attempts with 1 s, 2 s, 4 s backoff or Retry-After."""

    def __init__(self, inner: LlmClient, *, max_retries: int = MAX_RETRIES, base_delay: float = BASE_DELAY,
                 max_wait: float = MAX_WAIT) -> None:
        self.inner = inner
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_wait = max_wait

    @property
    def provider_name(self) -> str:
        return self.inner.provider_name

    @property
    def model(self) -> str:
        return self.inner.model

    def stream(self, messages: list[Message], tools: list[Tool], on_chunk: OnChunk,
               cancel: CancelToken) -> Choice:
        forwarded = False

        def relay(chunk: Chunk) -> None:
            nonlocal forwarded
            forwarded = True
            on_chunk(chunk)

        attempts = self.max_retries + 1
        for attempt in range(attempts):
            try:
                return self.inner.stream(messages, tools, relay, cancel)
            except OpenheimError as e:
                if isinstance(e, Cancelled) or cancel.cancelled:
                    raise Cancelled() from None
                if forwarded or attempt + 1 >= attempts or not is_retryable(e):
                    raise
                delay = self._delay(e, attempt)
                log.warning("LLM request failed (attempt %d/%d): %s. Retrying in %g s",
                            attempt + 1, attempts, e, delay)
                if cancel.wait(delay):
                    raise Cancelled() from None
        raise AssertionError("unreachable")

    def _delay(self, e: OpenheimError, attempt: int) -> float:
        if not isinstance(e, HttpError) or e.retry_after is None:
            return self.base_delay * (2 ** attempt)
        if e.retry_after > self.max_wait:
            raise wait_too_long(e, e.retry_after) from e
        return e.retry_after
