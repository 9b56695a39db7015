"""The fake LLM server itself: routing, recording, echo, faults and size limits."""

from __future__ import annotations

import json
import socket

import pytest
import requests
from fake_llm import FakeLLMServer, Fault, Reply


def post(srv, path, body):
    return requests.post(srv.url + path, data=json.dumps(body), headers={"X-Test": "1"}, timeout=5)


@pytest.mark.parametrize(
    "wire,path,body,needle",
    [
        ("openai", "/v1/chat/completions", {"messages": [{"role": "user", "content": "yo"}]}, '"content":"yo"'),
        (
            "anthropic",
            "/v1/messages",
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "yo"}]}]},
            '"text":"yo"',
        ),
        (
            "gemini",
            "/v1beta/models/g:streamGenerateContent?alt=sse",
            {"contents": [{"role": "user", "parts": [{"text": "yo"}]}]},
            '"text":"yo"',
        ),
    ],
)
def test_echo_when_queue_empty_and_requests_recorded(wire, path, body, needle):
    with FakeLLMServer(wire) as srv:
        r = post(srv, path, body)
        assert r.status_code == 200 and r.headers["Transfer-Encoding"] == "chunked"
        assert needle in r.text and "echo" in r.text
        rec = srv.requests[0]
        assert rec.path == path and rec.body == body and rec.headers["x-test"] == "1" and rec.headers["X-Test"] == "1"
        assert srv.base_url.startswith(srv.url) and srv.base_url.endswith("/v1beta" if wire == "gemini" else "/v1")


def test_unknown_route_is_404():
    with FakeLLMServer("openai") as srv:
        assert post(srv, "/v1/messages", {}).status_code == 404


def test_fault_statuses_and_queue_order():
    with FakeLLMServer("anthropic") as srv:
        srv.enqueue(Fault(status=429, retry_after=2), Fault(status=500, body="raw text"), Reply(text="ok"))
        assert srv.pending == 3
        r = post(srv, "/v1/messages", {})
        assert (
            r.status_code == 429 and r.headers["Retry-After"] == "2" and r.json()["error"]["type"] == "rate_limit_error"
        )
        assert post(srv, "/v1/messages", {}).text == "raw text"
        assert "ok" in post(srv, "/v1/messages", {}).text and srv.pending == 0


def test_max_request_bytes_answers_with_overflow_and_keeps_the_queue():
    with FakeLLMServer("gemini", max_request_bytes=50) as srv:
        srv.enqueue(Reply(text="for the trimmed request"))
        r = post(srv, "/v1beta/models/g:streamGenerateContent", {"contents": [], "pad": "x" * 100})
        assert r.status_code == 400 and "exceeds the maximum number of tokens" in r.text
        assert srv.pending == 1
        assert "trimmed" in post(srv, "/v1beta/models/g:streamGenerateContent", {"contents": []}).text


def test_drop_cuts_the_connection():
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Fault(drop_after_chunks=1))
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            post(srv, "/v1/chat/completions", {})


def test_stop_closes_idle_keepalive_connections():
    srv = FakeLLMServer("openai").start()
    sock = socket.create_connection(("127.0.0.1", srv.port))
    sock.settimeout(2)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    head = b""
    while b"}}" not in head:  # the whole 404 JSON body; the connection stays open (keep-alive)
        head += sock.recv(4096)
    srv.stop()
    assert sock.recv(10) == b""
    sock.close()


def test_unknown_wire_rejected():
    with pytest.raises(ValueError, match="unknown wire"):
        FakeLLMServer("soap")


def test_clear_drops_the_rest_of_a_script():
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Reply(text="a"), Fault(status=500))
        assert len(srv.clear()) == 2 and srv.pending == 0
        assert "echo" in post(srv, "/v1/chat/completions", {}).text
