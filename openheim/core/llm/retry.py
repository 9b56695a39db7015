"""The retry policy of every provider request (chat and embeddings), and RetryClient, which applies it
to a model's stream but never once output reached the caller."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

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
    from openheim.core.turn_context import CancelToken

log = logging.getLogger(__name__)

T = TypeVar("T")
RETRY_DELAY_ENV = "OPENHEIM_RETRY_BASE_DELAY"  # seconds; lets tests retry without real waits
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
    if isinstance(e, TransportError):
        return e.retryable
    return isinstance(e, IncompleteResponse)


def wait_too_long(e: HttpError, seconds: float) -> HttpError:
    """The error for a server that asked for a longer pause than we are willing to take."""
    return HttpError(e.status, f"rate limited: the provider asked to wait {seconds:.0f} s; try again later", seconds)


def base_delay_from_env() -> float:
    """The first backoff step: ``OPENHEIM_RETRY_BASE_DELAY`` seconds when set to a number, else 1 s."""
    try:
        return max(float(os.environ.get(RETRY_DELAY_ENV, "")), 0.0)
    except ValueError:
        return BASE_DELAY


class RetryPolicy:
    """Up to ``max_retries`` more attempts of a retryable failure, each after ``base_delay`` x 1, 2, 4 (1 s,
    2 s, 4 s by default) or the server's Retry-After (a failure of its own when longer than ``max_wait``)."""

    def __init__(
        self,
        *,
        max_retries: int = MAX_RETRIES,
        base_delay: float | None = None,
        max_wait: float = MAX_WAIT,
        pause: bool = True,
    ) -> None:
        self.max_retries = max_retries
        self.base_delay = base_delay_from_env() if base_delay is None else base_delay
        self.max_wait = max_wait
        self.pause = pause  # False (a replay): decide and log as usual, but do not wait

    def run(
        self, attempt: Callable[[], T], cancel: CancelToken, what: str, may_retry: Callable[[], bool] = lambda: True
    ) -> T:
        """``attempt()`` until it succeeds, fails for good, or ``may_retry()`` says no; Cancelled on cancel."""
        attempts = self.max_retries + 1
        for n in range(attempts):
            try:
                return attempt()
            except OpenheimError as e:
                if isinstance(e, Cancelled) or cancel.cancelled:
                    raise Cancelled() from None
                if n + 1 >= attempts or not may_retry() or not is_retryable(e):
                    raise
                delay = self.delay(e, n)
                log.warning("%s failed (attempt %d/%d): %s. Retrying in %g s", what, n + 1, attempts, e, delay)
                if cancel.wait(delay if self.pause else 0):
                    raise Cancelled() from None
        raise AssertionError("unreachable")

    def delay(self, e: OpenheimError, attempt: int) -> float:
        """Seconds before the next attempt; raises the failure itself when the server asks for too long."""
        if not isinstance(e, HttpError) or e.retry_after is None:
            return self.base_delay * (2**attempt)
        if e.retry_after > self.max_wait:
            raise wait_too_long(e, e.retry_after) from e
        return e.retry_after


class RetryClient:
    """Wraps an LlmClient in the RetryPolicy; an attempt that already showed output is never repeated."""

    def __init__(
        self,
        inner: LlmClient,
        *,
        max_retries: int = MAX_RETRIES,
        base_delay: float | None = None,
        max_wait: float = MAX_WAIT,
        pause: bool = True,
    ) -> None:
        self.inner = inner
        self.policy = RetryPolicy(max_retries=max_retries, base_delay=base_delay, max_wait=max_wait, pause=pause)

    @property
    def base_delay(self) -> float:
        return self.policy.base_delay

    @property
    def provider_name(self) -> str:
        return self.inner.provider_name

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def native_output(self) -> bool:
        """Whether the wrapped client sends an output schema in the wire's own structured-output mode."""
        return bool(getattr(self.inner, "native_output", False))

    @property
    def session_cache(self) -> bool:
        """Whether the wrapped client takes the session's id to key its prompt cache."""
        return bool(getattr(self.inner, "session_cache", False))

    def stream(
        self, messages: list[Message], tools: list[Tool], on_chunk: OnChunk, cancel: CancelToken, **options: Any
    ) -> Choice:
        forwarded = False

        def relay(chunk: Chunk) -> None:
            nonlocal forwarded
            forwarded = True
            on_chunk(chunk)

        return self.policy.run(
            lambda: self.inner.stream(messages, tools, relay, cancel, **options),
            cancel,
            "LLM request",
            may_retry=lambda: not forwarded,
        )
