"""`openheim run` against every provider kind's wire: round trips, faults and request shapes, end to end."""

from __future__ import annotations

import json
import re

import pytest
from cli_helpers import fake_provider, openheim
from fake_llm import Fault, Reply, ToolCall

KINDS = {"openai": "openai", "openai_compatible": "openai", "anthropic": "anthropic", "gemini": "gemini"}
FAST_RETRY = {"OPENHEIM_RETRY_BASE_DELAY": "0.01"}
SECRET = "sk-test-SECRET-123"


@pytest.fixture(params=sorted(KINDS))
def kind(request):
    return request.param


@pytest.fixture
def srv(kind, isolated_home):
    with fake_provider(kind, isolated_home, provider_extra="max_tokens = 321") as server:
        yield server


def run(*args, cwd, env=None):
    return openheim("run", *args, cwd=cwd, env={**FAST_RETRY, **(env or {})})


def test_round_trip_with_a_tool_call(kind, srv, tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    srv.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "a.txt"})], thinking="plan it"),
        Reply(text="The file says alpha, all good.", thinking="private musing", usage=(40, 9)),
    )
    r = run("-o", "stream-json", "read a.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    text = "".join(x["content"] for x in lines if x["type"] == "llm_response")
    assert text == "The file says alpha, all good."
    result = lines[-1]
    assert result["usage"]["input_tokens"] + result["usage"]["cache_read_tokens"] >= 40
    assert result["usage"]["output_tokens"] >= 9 and result["iterations"] == 2
    plain = run("say it", cwd=tmp_path)  # the echo reply: text mode keeps thinking off stdout
    assert plain.returncode == 0 and plain.stdout == "echo: say it\n"
    srv.enqueue(Reply(text="visible", thinking="hidden thoughts"))
    r = run("again", cwd=tmp_path)
    assert r.stdout == "visible\n" and "hidden thoughts" not in r.stdout + r.stderr


def test_request_shape_follows_the_wire(kind, srv, tmp_path):
    srv.enqueue(Reply(tool_calls=[ToolCall("list_dir", {})]), Reply(text="ok"))
    assert run("look", cwd=tmp_path).returncode == 0
    first, second = srv.requests[0], srv.requests[1]
    assert SECRET not in first.path
    if kind in ("openai", "openai_compatible"):
        assert first.headers["authorization"] == f"Bearer {SECRET}"
        limit = "max_completion_tokens" if kind == "openai" else "max_tokens"
        assert first.body[limit] == 321 and first.body["stream"] is True
        assert first.body["tools"][0]["type"] == "function"
        assert second.body["messages"][-1]["role"] == "tool"
    elif kind == "anthropic":
        assert first.headers["x-api-key"] == SECRET and first.headers["anthropic-version"] == "2023-06-01"
        assert first.body["max_tokens"] == 321 and isinstance(first.body["system"], list)
        assert first.body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert "input_schema" in first.body["tools"][0]
        assert second.body["messages"][-1]["content"][0]["type"] == "tool_result"
    else:
        assert first.headers["x-goog-api-key"] == SECRET and first.path.endswith(":streamGenerateContent?alt=sse")
        assert first.body["generationConfig"]["maxOutputTokens"] == 321
        assert "functionDeclarations" in first.body["tools"][0] and "systemInstruction" in first.body
        assert "functionResponse" in second.body["contents"][-1]["parts"][0]


@pytest.mark.parametrize(
    "fault",
    [
        Fault(status=429, retry_after=0.1),
        Fault(status=500),
        Fault(status=529),
        Fault(status=503),
        Fault(in_stream_error="overloaded_error"),
        Fault(drop_after_chunks=0),
    ],
)
def test_transient_faults_are_retried_to_success(kind, srv, tmp_path, fault):
    srv.enqueue(fault, Reply(text="recovered"))
    r = run("hi", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "recovered\n" and len(srv.requests) == 2


@pytest.mark.parametrize(
    ("fault", "expect"),
    [
        (Fault(status=401), "HTTP 401"),
        (
            Fault(
                status=429,
                body={
                    "error": {
                        "message": "You exceeded your current quota",
                        "type": "insufficient_quota",
                        "code": "insufficient_quota",
                    }
                },
            ),
            "HTTP 429",
        ),
        (Fault(drop_after_chunks=2, reply=Reply(text="one two three four five six")), "mid-response|Incomplete"),
        (Fault(in_stream_error="overloaded_error", error_after_chunks=2, reply=Reply(text="a b c d e f")), "verload"),
        (Fault(status=429, retry_after=3600), "wait"),
    ],
)
def test_fatal_faults_end_with_one_line_and_exit_one(kind, srv, tmp_path, fault, expect):
    srv.enqueue(fault)
    r = run("hi", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("Error: ") and re.search(expect, err[0]), r.stderr
    assert "Traceback" not in r.stderr and len(srv.requests) == 1


def test_overflow_of_the_current_turn_says_start_a_new_session(kind, srv, tmp_path):
    srv.enqueue(Fault(overflow=True), Fault(overflow=True), Fault(overflow=True))
    r = run("hi", cwd=tmp_path)
    assert r.returncode == 1
    assert "start a new session" in r.stderr and len(srv.requests) == 1


@pytest.mark.parametrize(("finish", "code"), [("length", 4), ("refusal", 5)])
def test_provider_stop_reasons_map_to_exit_codes(kind, srv, tmp_path, finish, code):
    wire_finish = {
        ("anthropic", "length"): "max_tokens",
        ("gemini", "length"): "MAX_TOKENS",
        ("gemini", "refusal"): "SAFETY",
        ("openai", "refusal"): "content_filter",
        ("openai_compatible", "refusal"): "content_filter",
    }.get((kind, finish), finish)
    srv.enqueue(Reply(text="partial", finish=wire_finish))
    assert run("hi", cwd=tmp_path).returncode == code
