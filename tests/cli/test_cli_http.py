"""`openheim run` end to end against the fake server: what reaches the user when the HTTP layer meets a
real third-party server, hostile payloads, credentials in api_base, and models = []."""

from __future__ import annotations

import json
import socket

import pytest
from cli_helpers import fake_provider, openheim, write_config
from fake_llm import FakeLLMServer, Fault, Reply, ToolCall

KINDS = {"openai_compatible": "openai", "anthropic": "anthropic", "gemini": "gemini"}
ENV = {"OPENHEIM_RETRY_BASE_DELAY": "0.01"}
SECRETS = ("pw-SECRET-1", "Q-SECRET-2", "sk-test-SECRET-123", "user-SECRET-3")


@pytest.fixture(params=sorted(KINDS))
def kind(request):
    return request.param


@pytest.fixture
def srv(kind, isolated_home):
    with fake_provider(kind, isolated_home) as server:
        yield server


def run(*args, cwd, env=None):
    return openheim("run", *args, cwd=cwd, env={**ENV, **(env or {})})


def one_error_line(r) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- replies a real server sends ------------------------------------------------------------------


def test_a_whole_json_reply_to_a_streaming_request(kind, srv, tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    srv.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "a.txt"})], whole=True),
        Reply(text="It says alpha.", whole=True),
    )
    r = run("read a.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "It says alpha.\n" and len(srv.requests) == 2


def test_events_without_blank_lines(kind, srv, tmp_path):
    srv.enqueue(Reply(text="no blank lines here", blank_lines=False))
    r = run("hi", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "no blank lines here\n"


HOSTILE = {
    "openai_compatible": (['data: {"choices":"x"}\n\n'], "choices is a string, not a list"),
    "anthropic": (
        ['event: message_start\ndata: {"type":"message_start","message":"x"}\n\n'],
        "message is a string, not an object",
    ),
    "gemini": (['data: {"candidates":[5]}\r\n\r\n'], "candidates[0] is a number, not an object"),
}


def test_wrong_shaped_json_is_one_line_and_not_retried(kind, srv, tmp_path):
    raw, what = HOSTILE[kind]
    srv.enqueue(Reply(raw_sse=raw), Reply(text="never asked for"))
    r = run("hi", cwd=tmp_path)
    line = one_error_line(r)
    assert r.returncode == 1 and "malformed" in line and what in line
    assert len(srv.requests) == 1


def test_an_html_page_without_content_type_is_not_blamed_on_the_context(kind, srv, tmp_path):
    page = "<!DOCTYPE html><html><head><title>Portal</title></head><body>Log in first</body></html>"
    srv.enqueue(Reply(raw_sse=[page], content_type=None), Reply(text="never asked for"))
    r = run("hi", cwd=tmp_path)
    line = one_error_line(r)
    assert r.returncode == 1 and "an HTML page" in line and "content type none" in line
    assert "<!DOCTYPE html><html><head><title>Portal" in line and "context" not in line
    assert len(srv.requests) == 1


def test_a_reply_compressed_with_br_is_one_clear_line(kind, srv, tmp_path):
    srv.enqueue(Reply(raw_sse=[b"\x8b\x0b\x80\xff\xfe\x00 not really brotli"], headers={"Content-Encoding": "br"}))
    r = run("hi", cwd=tmp_path)
    line = one_error_line(r)
    assert r.returncode == 1 and "compressed with 'br'" in line and len(srv.requests) == 1


def test_a_huge_event_fails_at_once(kind, srv, tmp_path):
    srv.enqueue(Reply(raw_sse=["data: " + "x" * (512 * 1024) + "\n"] * 40), Reply(text="never asked for"))
    r = run("hi", cwd=tmp_path)
    line = one_error_line(r)
    assert r.returncode == 1 and "larger than 16 MiB" in line and len(srv.requests) == 1


# --- provider errors --------------------------------------------------------------------------------

NOT_FOUND = {
    "openai_compatible": {
        "error": {
            "message": "The model `fake-model` does not exist",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    },
    "anthropic": {"type": "error", "error": {"type": "not_found_error", "message": "model: fake-model"}},
    "gemini": {"error": {"code": 404, "message": "models/fake-model is not found", "status": "NOT_FOUND"}},
}


def test_provider_error_names_its_message_status_and_a_matching_hint(kind, srv, tmp_path):
    srv.enqueue(Fault(status=404, body=NOT_FOUND[kind]))
    line = one_error_line(run("hi", cwd=tmp_path))
    assert line.startswith("Error: HTTP 404: ") and "fake-model" in line and "{" not in line
    assert line.endswith("(check the model name and api_base)")


def test_unreachable_upstream_is_a_server_failure_not_a_busy_provider(isolated_home, tmp_path):
    with FakeLLMServer("openai") as srv:
        write_config(isolated_home, srv.base_url)
        body = {"error": {"message": "upstream connect error: connection refused", "type": "None", "code": "500"}}
        srv.enqueue(*[Fault(status=500, body=body) for _ in range(4)])
        r = run("hi", cwd=tmp_path)
        assert len(srv.requests) == 4
    line = r.stderr.strip().splitlines()[-1]  # after three "Retrying" warnings
    assert line.startswith("Error: HTTP 500: upstream connect error: connection refused")
    assert "server failed" in line and "busy" not in line and "rate" not in line


# --- credentials in api_base never reach the output ------------------------------------------------


@pytest.mark.parametrize("output", ["text", "stream-json"])
def test_credentials_in_api_base_never_printed(kind, isolated_home, tmp_path, output):
    base = f"http://user-SECRET-3:pw-SECRET-1@127.0.0.1:{_closed_port()}/v1?key=Q-SECRET-2"
    write_config(isolated_home, base, kind=kind)
    r = run("-v", "-o", output, "hi", cwd=tmp_path, env={"OPENHEIM_LOG": "debug"})
    assert r.returncode == 1
    assert "could not connect to 127.0.0.1" in r.stderr and "Retrying" in r.stderr
    if output == "stream-json":
        assert "could not connect" in json.loads(r.stdout.splitlines()[-1])["message"]
    for secret in SECRETS:
        assert secret not in r.stdout and secret not in r.stderr, secret


def test_secrets_echoed_by_a_live_server_are_redacted(isolated_home, tmp_path):
    """The query key stays a query after the endpoint path and reaches the server; urllib3 logs the request
    line at debug level, which must be redacted."""
    with FakeLLMServer("openai") as srv:
        write_config(isolated_home, srv.base_url + "?key=Q-SECRET-2")
        r = run("-v", "hi", cwd=tmp_path, env={"OPENHEIM_LOG": "debug"})
        assert srv.requests[0].path.endswith("/chat/completions?key=Q-SECRET-2")
    assert r.returncode == 0, r.stderr
    for secret in SECRETS:
        assert secret not in r.stdout and secret not in r.stderr, secret


# --- models = [] accepts any model ------------------------------------------------------------------


def _open_providers(home, url: str, names: list[str]) -> None:
    text = f'default_provider = "{names[0]}"\n'
    for name in names:
        text += (
            f'[providers.{name}]\nkind = "openai_compatible"\napi_base = "{url}"\ndefault_model = "base-m"\n'
            "models = []\n"
        )
    text += (
        '[providers.listed]\nkind = "openai_compatible"\napi_base = "http://127.0.0.1:1/v1"\n'
        'default_model = "only-m"\nmodels = ["only-m"]\n'
    )
    (home / "config.toml").write_text(text)


def test_model_is_taken_by_the_one_provider_that_accepts_any(isolated_home, tmp_path):
    with FakeLLMServer("openai") as srv:
        _open_providers(isolated_home, srv.base_url, ["local"])
        r = run("--model", "llama-3-70b", "hi", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "echo: hi\n" and srv.requests[0].body["model"] == "llama-3-70b"


def test_several_providers_that_accept_any_model_ask_for_provider(isolated_home, tmp_path):
    _open_providers(isolated_home, "http://127.0.0.1:1/v1", ["beta", "alpha"])
    r = run("--model", "llama-3-70b", "hi", cwd=tmp_path)
    line = one_error_line(r)
    assert r.returncode == 2 and "alpha, beta" in line and "--provider" in line
