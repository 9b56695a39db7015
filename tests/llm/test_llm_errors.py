"""Error replies and retries, socket-free (the `responses` library stands in for the network).

Provider messages are taken from the three error-body shapes, the HTTP status is kept, the CLI's hint
matches the status, and chat and embeddings share one retry policy.
"""

from __future__ import annotations

import json
import os

import pytest
import responses

from openheim.cli import describe
from openheim.config.agent_config import AgentConfig
from openheim.core.llm.factory import create_client
from openheim.core.llm.http_errors import provider_message
from openheim.core.models import Message
from openheim.core.turn_context import CancelToken
from openheim.errors import ApiError, HttpError
from openheim.memory.embedding import GeminiEmbeddings, OpenAIEmbeddings

BASE = "http://api.test/v1"
URLS = {
    "openai": BASE + "/chat/completions",
    "anthropic": BASE + "/messages",
    "gemini": BASE + "/models/m:streamGenerateContent?alt=sse",
}
OK_STREAMS = {
    "openai": b'data: {"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
    "anthropic": (
        b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"hi"}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    ),
    "gemini": b'data: {"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}]}\r\n\r\n',
}
ERROR_BODIES = {
    "openai": {
        "error": {
            "message": "The model `nope` does not exist",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    },
    "anthropic": {
        "type": "error",
        "error": {"type": "not_found_error", "message": "model: nope"},
        "request_id": "req_1",
    },
    "gemini": {
        "error": {"code": 404, "message": "models/nope is not found for API version v1beta", "status": "NOT_FOUND"}
    },
}


@pytest.fixture(autouse=True)
def no_waits(monkeypatch):
    monkeypatch.setenv("OPENHEIM_RETRY_BASE_DELAY", "0")


@pytest.fixture
def mock():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rm:
        yield rm


def ask(wire: str) -> str:
    client = create_client(AgentConfig("p", wire, BASE, "sk-k", "m"))
    chunks: list = []
    choice = client.stream([Message.user("hello")], [], chunks.append, CancelToken())
    assert "".join(c.text for c in chunks) == choice.message.text()
    return choice.message.text()


@pytest.mark.parametrize(
    "body,expected",
    [
        (ERROR_BODIES["openai"], "The model `nope` does not exist (invalid_request_error)"),
        (ERROR_BODIES["anthropic"], "model: nope (not_found_error)"),
        (ERROR_BODIES["gemini"], "models/nope is not found for API version v1beta (NOT_FOUND)"),
        (
            {"object": "error", "message": "bad input", "type": "BadRequestError", "code": 400},
            "bad input (BadRequestError)",
        ),
        ({"error": "upstream unreachable"}, "upstream unreachable"),
        ({"detail": "Not Found"}, "Not Found"),
        (
            [{"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}],
            "Quota exceeded (RESOURCE_EXHAUSTED)",
        ),
        (
            "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
            "an HTML page: 502 Bad Gateway instead of an API error",
        ),
        ("", "Internal Server Error (empty body)"),
        ("upstream\n  connect error", "upstream connect error"),
    ],
)
def test_provider_message_from_every_error_shape(body, expected):
    text = body if isinstance(body, str) else json.dumps(body)
    assert provider_message(text, 500) == expected


@pytest.mark.parametrize("wire", list(URLS))
def test_a_streamed_reply_reads_without_a_socket(mock, wire):
    mock.post(URLS[wire], body=OK_STREAMS[wire], content_type="text/event-stream")
    assert ask(wire) == "hi"


@pytest.mark.parametrize("wire", list(URLS))
def test_error_reply_keeps_status_and_gives_the_providers_words(mock, wire):
    mock.post(URLS[wire], status=404, json=ERROR_BODIES[wire])
    with pytest.raises(HttpError) as info:
        ask(wire)
    assert len(mock.calls) == 1  # a 404 is not retried
    text = describe(info.value)
    assert text.startswith("HTTP 404: ") and "nope" in text and "{" not in text
    assert text.endswith("(check the model name and api_base)")


@pytest.mark.parametrize("wire", list(URLS))
def test_server_failure_is_retried_then_blamed_on_the_server(mock, wire):
    mock.post(URLS[wire], status=500, json={"error": {"message": "upstream unreachable", "code": 500}})
    with pytest.raises(HttpError) as info:
        ask(wire)
    assert len(mock.calls) == 4
    text = describe(info.value)
    assert text.startswith("HTTP 500: upstream unreachable") and "server failed" in text
    assert "busy" not in text and "rate" not in text


@pytest.mark.parametrize(
    "status,hint",
    [
        (400, "the provider rejected the request"),
        (401, "API key"),
        (403, "API key"),
        (404, "model name and api_base"),
        (429, "rate limited"),
        (500, "server failed"),
        (502, "server failed"),
        (503, "server failed"),
        (529, "server failed"),
    ],
)
def test_hint_matches_the_status(status, hint):
    text = describe(HttpError(status, "{}", message="the reason"))
    assert text.startswith(f"HTTP {status}: the reason (") and text.endswith(")") and hint in text


def test_400_names_the_providers_reason(mock):
    body = {"error": {"message": "Unknown parameter: 'foo'", "type": "invalid_request_error"}}
    mock.post(URLS["openai"], status=400, json=body)
    with pytest.raises(HttpError) as info:
        ask("openai")
    assert describe(info.value) == (
        "HTTP 400: Unknown parameter: 'foo' (invalid_request_error) "
        "(the provider rejected the request; its reason is above)"
    )


@pytest.mark.parametrize("wire", list(URLS))
def test_compressed_reply_we_cannot_decode_is_reported_once(mock, wire):
    mock.post(URLS[wire], body=os.urandom(200), content_type="text/event-stream", headers={"Content-Encoding": "br"})
    with pytest.raises(ApiError, match="compressed with 'br'") as info:
        ask(wire)
    assert len(mock.calls) == 1 and not info.value.retryable


def test_embeddings_share_the_retry_policy(mock):
    url = BASE + "/embeddings"
    mock.post(url, status=503, json={"error": {"message": "overloaded"}})
    mock.post(url, status=429, json={"error": {"message": "slow down"}})
    mock.post(url, json={"data": [{"index": 0, "embedding": [0.5, 0.25]}]})
    assert OpenAIEmbeddings(BASE, "sk-e", "embed").embed(["x"]) == [[0.5, 0.25]]
    assert len(mock.calls) == 3
    assert mock.calls[0].request.headers["User-Agent"] == "openheim"


def test_embeddings_refuse_a_wait_longer_than_the_cap(mock):
    url = BASE + "/models/e:batchEmbedContents"
    mock.post(url, status=429, json={"error": {"message": "later"}}, headers={"Retry-After": "3600"})
    with pytest.raises(HttpError, match="asked to wait 3600 s"):
        GeminiEmbeddings(BASE, "g-k", "e").embed(["x"])
    assert len(mock.calls) == 1


def test_embeddings_error_message_is_the_providers(mock):
    mock.post(BASE + "/embeddings", status=400, json={"error": {"message": "input too long", "type": "invalid"}})
    with pytest.raises(HttpError) as info:
        OpenAIEmbeddings(BASE, "sk-e", "embed").embed(["x"])
    assert str(info.value) == "HTTP 400: input too long (invalid)" and info.value.status == 400


def test_embeddings_reply_that_is_not_json_is_one_unretried_error(mock):
    mock.post(BASE + "/embeddings", body="<<garbage>>", content_type="text/plain")
    with pytest.raises(ApiError, match=r"not JSON; content type text/plain; it begins '<<garbage>>'"):
        OpenAIEmbeddings(BASE, "sk-e", "embed").embed(["x"])
    assert len(mock.calls) == 1
