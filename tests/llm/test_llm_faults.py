"""The same fault matrix against every wire client (through create_client, so with retries)."""

from __future__ import annotations

import threading
import time

import pytest
from fake_llm import FakeLLMServer, Fault, Reply

from openheim.config.agent_config import AgentConfig
from openheim.core.llm.factory import create_client
from openheim.core.models import Message
from openheim.core.turn_context import CancelToken
from openheim.errors import (
    ApiError,
    Cancelled,
    ContextOverflow,
    HttpError,
    TransportError,
)

KINDS = {"openai": "openai", "anthropic": "anthropic", "gemini": "gemini"}
QUOTA = {
    "openai": {
        "error": {
            "type": "insufficient_quota",
            "code": "insufficient_quota",
            "message": "You exceeded your current quota",
        }
    },
    "anthropic": {"type": "error", "error": {"type": "billing_error", "message": "insufficient_quota"}},
    "gemini": {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "quota",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}],
                }
            ],
        }
    },
}


@pytest.fixture(params=list(KINDS))
def srv(request):
    with FakeLLMServer(request.param) as s:
        yield s


def client(srv, **kw):
    cfg = AgentConfig("p", KINDS[srv.wire], srv.base_url, "key-123", "model-x", **kw)
    return create_client(cfg, base_delay=0.001)


def ask(srv, cancel=None, **kw):
    chunks = []
    choice = client(srv, **kw).stream([Message.user("hello")], [], chunks.append, cancel or CancelToken())
    return choice, "".join(c.text for c in chunks)


def test_retry_after_then_server_error_then_success(srv):
    srv.enqueue(Fault(status=429, retry_after=0.02), Fault(status=502), Reply(text="fine"))
    assert ask(srv)[0].message.text() == "fine" and len(srv.requests) == 3


def test_in_stream_error_before_first_chunk_is_retried(srv):
    srv.enqueue(Fault(in_stream_error="overloaded_error"), Reply(text="again"))
    choice, text = ask(srv)
    assert choice.message.text() == "again" and text == "again"


def test_in_stream_error_after_first_chunk_is_not(srv):
    srv.enqueue(Fault(in_stream_error="overloaded_error", error_after_chunks=1), Reply(text="never"))
    with pytest.raises(ApiError):
        ask(srv)
    assert len(srv.requests) == 1


def test_drop_before_first_chunk_is_retried(srv):
    srv.enqueue(Fault(drop_after_chunks=0), Reply(text="retried"))
    assert ask(srv)[0].message.text() == "retried" and len(srv.requests) == 2


def test_drop_after_first_chunk_is_not(srv):
    srv.enqueue(Fault(drop_after_chunks=1), Reply(text="never"))
    with pytest.raises(TransportError):
        ask(srv)
    assert len(srv.requests) == 1


def test_overflow_is_context_overflow_and_not_retried(srv):
    srv.enqueue(Fault(overflow=True))
    with pytest.raises(ContextOverflow):
        ask(srv)
    assert len(srv.requests) == 1


def test_quota_exhaustion_is_not_retried(srv):
    srv.enqueue(Fault(status=429, body=QUOTA[srv.wire]))
    with pytest.raises(HttpError):
        ask(srv)
    assert len(srv.requests) == 1


def test_long_retry_after_is_refused_with_the_wait(srv):
    srv.enqueue(Fault(status=429, retry_after=90))
    with pytest.raises(HttpError, match="asked to wait 90 s"):
        ask(srv)
    assert len(srv.requests) == 1


def test_redirect_is_refused(srv):
    srv.enqueue(Fault(status=301, headers={"Location": "http://127.0.0.1:9/elsewhere"}, body=""))
    with pytest.raises(HttpError, match="redirect"):
        ask(srv)
    assert len(srv.requests) == 1


def test_client_errors_are_not_retried(srv):
    srv.enqueue(Fault(status=404))
    with pytest.raises(HttpError) as info:
        ask(srv)
    assert info.value.status == 404 and len(srv.requests) == 1


def test_key_never_in_url(srv):
    ask(srv)
    assert "key-123" not in srv.requests[0].path and "key-123" in str(srv.requests[0].headers)


def test_cancel_during_slow_stream_within_200ms(srv):
    srv.enqueue(Reply(text="x" * 30, chunk_size=1, delay=0.5))
    token = CancelToken()
    fired: list[float] = []

    def cancel() -> None:
        fired.append(time.monotonic())
        token.cancel()

    threading.Timer(0.25, cancel).start()
    with pytest.raises(Cancelled):
        ask(srv, cancel=token)
    assert time.monotonic() - fired[0] < 0.2


def test_slow_server_option_paces_every_reply():
    with FakeLLMServer("openai", slow=0.05) as s:
        start = time.monotonic()
        choice, _ = ask(s)
        assert choice.message.text() == "echo: hello" and time.monotonic() - start >= 0.2


def test_idle_timeout_is_retried_then_reported(srv):
    srv.enqueue(*[Reply(text="a b", head_delay=1.0)] * 4)
    start = time.monotonic()
    with pytest.raises(TransportError, match="timeout_secs"):
        ask(srv, timeout_secs=0.15)
    assert len(srv.requests) == 4 and time.monotonic() - start < 2


def test_a_stream_of_keep_alives_only_is_a_timeout(srv):
    """timeout_secs counts time without content: comments every 0.1 s do not keep a silent stream alive."""
    keep_alives = Reply(raw_sse=[b": ping\n\n"] * 40, delay=0.1)
    srv.enqueue(*[keep_alives] * 4)
    start = time.monotonic()
    with pytest.raises(TransportError, match=r"only keep-alive comments for 0\.5 s \(timeout_secs\)"):
        ask(srv, timeout_secs=0.5)
    assert len(srv.requests) == 4 and time.monotonic() - start < 4  # retried like any timeout, then reported
    srv.enqueue(Reply(text="a b c d e f g h", delay=0.15))
    assert ask(srv, timeout_secs=0.5)[1] == "a b c d e f g h"  # content 0.15 s apart, 1.2 s in all: fine
