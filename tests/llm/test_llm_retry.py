"""RetryClient policy, driven by a scripted inner client (no network, no real waits)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from openheim.core.llm.base import Chunk
from openheim.core.llm.retry import RetryClient, is_retryable
from openheim.core.models import Choice, Message
from openheim.core.turn_context import CancelToken
from openheim.errors import (
    ApiError,
    Cancelled,
    ContextOverflow,
    HttpError,
    IncompleteResponse,
    ParseError,
    TransportError,
)

OK = Choice(Message.assistant("ok"))


class Scripted:
    """An LlmClient whose attempts follow a script: an exception, or chunks then a reply/exception."""

    provider_name = "fake"
    model = "m"

    def __init__(self, *steps):
        self.steps = list(steps)
        self.calls = 0

    def stream(self, messages, tools, on_chunk, cancel):
        self.calls += 1
        step = self.steps.pop(0)
        if isinstance(step, tuple):
            chunks, step = step
            for text in chunks:
                on_chunk(Chunk("text", text))
        if isinstance(step, BaseException):
            raise step
        return step


class RecordingToken(CancelToken):
    """Records each requested wait instead of sleeping."""

    def __init__(self):
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return self.cancelled


def run(inner, token=None, **kw):
    chunks: list[Chunk] = []
    client = RetryClient(inner, **kw)
    token = token or RecordingToken()
    return client.stream([Message.user("hi")], [], chunks.append, token), chunks, token


def test_backoff_is_one_two_four_seconds_then_gives_up():
    inner = Scripted(*[HttpError(503, "down")] * 4)
    token = RecordingToken()
    with pytest.raises(HttpError):
        run(inner, token)
    assert inner.calls == 4 and token.waits == [1.0, 2.0, 4.0]


def test_base_delay_is_injectable():
    token = RecordingToken()
    run(Scripted(TransportError("reset"), IncompleteResponse("cut"), OK), token, base_delay=0.01)
    assert token.waits == [0.01, 0.02]


@pytest.mark.parametrize(
    "err",
    [
        HttpError(408, ""),
        HttpError(409, ""),
        HttpError(429, "slow down"),
        HttpError(500, ""),
        HttpError(502, ""),
        HttpError(503, ""),
        HttpError(504, ""),
        HttpError(529, "overloaded"),
        TransportError("refused"),
        IncompleteResponse("cut"),
        ApiError("overloaded", retryable=True),
    ],
)
def test_retryable_errors_are_retried_to_success(err):
    inner = Scripted(err, OK)
    choice, _, _ = run(inner)
    assert choice is OK and inner.calls == 2


@pytest.mark.parametrize(
    "err",
    [
        ContextOverflow("too long"),
        HttpError(400, "bad"),
        HttpError(401, "key"),
        HttpError(404, "model"),
        HttpError(402, "insufficient credits"),
        ApiError("bad tool", retryable=False),
        ParseError("x"),
        HttpError(429, '{"error":{"type":"insufficient_quota","message":"You exceeded your current quota"}}'),
        HttpError(429, '{"error":{"details":[{"violations":[{"quotaId":"GenerateRequestsPerDayPerProject"}]}]}}'),
    ],
)
def test_non_retryable_errors_fail_at_once(err):
    inner = Scripted(err, OK)
    with pytest.raises(type(err)):
        run(inner)
    assert inner.calls == 1 and not is_retryable(err)


def test_retry_after_is_honoured():
    token = RecordingToken()
    run(Scripted(HttpError(429, "", retry_after=3.5), OK), token)
    assert token.waits == [3.5]


def test_retry_after_beyond_cap_fails_with_clear_message():
    inner = Scripted(HttpError(429, "rate", retry_after=120), OK)
    with pytest.raises(HttpError) as info:
        run(inner)
    assert inner.calls == 1 and info.value.status == 429
    assert "the provider asked to wait 120 s; try again later" in str(info.value)


def test_never_retried_after_a_chunk_reached_the_caller():
    inner = Scripted((["partial"], TransportError("reset")), OK)
    with pytest.raises(TransportError):
        run(inner)
    assert inner.calls == 1


def test_chunks_of_a_successful_retry_are_forwarded():
    inner = Scripted(IncompleteResponse("cut"), (["a", "b"], OK))
    choice, chunks, _ = run(inner)
    assert [c.text for c in chunks] == ["a", "b"] and choice is OK


def test_log_line_names_attempt_and_delay(caplog):
    caplog.set_level(logging.WARNING)
    run(Scripted(HttpError(500, "boom"), OK))
    assert "LLM request failed (attempt 1/4): HTTP 500: boom. Retrying in 1 s" in caplog.text


def test_cancel_during_backoff_wait_is_prompt():
    inner = Scripted(HttpError(503, ""), OK)
    token = CancelToken()
    threading.Timer(0.1, token.cancel).start()
    start = time.monotonic()
    with pytest.raises(Cancelled):
        RetryClient(inner, base_delay=30).stream([], [], lambda c: None, token)
    assert time.monotonic() - start < 0.5 and inner.calls == 1


def test_error_after_cancel_is_reported_as_cancelled():
    token = CancelToken()

    class CancelThenFail(Scripted):
        def stream(self, *a):
            token.cancel()
            raise TransportError("socket shut down")

    with pytest.raises(Cancelled):
        RetryClient(CancelThenFail()).stream([], [], lambda c: None, token)


def test_exposes_provider_and_model():
    client = RetryClient(Scripted())
    assert (client.provider_name, client.model) == ("fake", "m")
