"""`openheim run` end to end: a subprocess against a fake OpenAI-wire server on 127.0.0.1."""

from __future__ import annotations

import json
import signal
import time

import pytest
from cli_helpers import openheim, spawn, write_config
from fake_llm import FakeLLMServer, Fault, Reply, ToolCall

SECRET = "sk-test-SECRET-123"


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


def test_streams_reply_text_and_exits_zero(srv, tmp_path):
    srv.enqueue(Reply(text="Hello there, world", thinking="secret thoughts"))
    r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Hello there, world\n"
    assert "secret thoughts" not in r.stdout + r.stderr
    assert srv.requests[0].body["messages"][-1] == {"role": "user", "content": "hi"}
    assert srv.requests[0].body.get("max_tokens", True)


def test_tool_round_trip_with_real_read_file(srv, tmp_path):
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    srv.enqueue(Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]), Reply(text="It says 42."))
    r = openheim("run", "-v", "what do my notes say?", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "It says 42.\n"
    assert "read_file" in r.stderr
    tool_msg = srv.requests[1].body["messages"][-1]
    assert tool_msg["role"] == "tool" and "the answer is 42" in tool_msg["content"]


def test_piped_stdin_is_the_prompt_or_appended_context(srv, tmp_path):
    assert openheim("run", input="from stdin", cwd=tmp_path).stdout == "echo: from stdin\n"
    r = openheim("run", "review this", input="diff --git a b\n+x\n", cwd=tmp_path)
    assert r.returncode == 0
    content = srv.requests[-1].body["messages"][-1]["content"]
    assert content.startswith("review this\n\n") and "+x" in content


def test_no_prompt_is_a_usage_error(srv, tmp_path):
    r = openheim("run", cwd=tmp_path)
    assert r.returncode == 2 and "no prompt given" in r.stderr


def test_json_output(srv, tmp_path):
    srv.enqueue(Reply(text="Grüße ✓", usage=(11, 4)))
    r = openheim("run", "--output", "json", "hi", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Grüße ✓" in r.stdout  # UTF-8, not ASCII-escaped
    obj = json.loads(r.stdout)
    assert set(obj) == {"text", "stop_reason", "iterations", "usage", "session_id", "model", "provider", "denied"}
    assert obj["text"] == "Grüße ✓" and obj["stop_reason"] == "end_turn" and obj["iterations"] == 1
    assert obj["usage"]["input_tokens"] == 11 and obj["usage"]["output_tokens"] == 4
    assert obj["model"] == "fake-model" and obj["provider"] == "fake"


def test_stream_json_lines(srv, tmp_path):
    srv.enqueue(Reply(tool_calls=[ToolCall("list_dir", {})]), Reply(text="done"))
    r = openheim("run", "-o", "stream-json", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert all("type" in x and x["schema_version"] == 1 for x in lines)
    types = [x["type"] for x in lines]
    assert types[0] == "iteration_start" and types[-1] == "result"
    for t in ("tool_call", "tool_result", "llm_response", "message_appended", "finished"):
        assert t in types
    result = lines[-1]
    assert result["text"] == "done" and result["stop_reason"] == "end_turn" and result["iterations"] == 2


@pytest.mark.parametrize(
    ("replies", "args", "code", "notice"),
    [
        ([Reply(tool_calls=[ToolCall("list_dir", {})])] * 3, ["--max-iterations", "2"], 3, "iteration limit"),
        ([Reply(text="cut", finish="length")], [], 4, "output token limit"),
        ([Reply(text="", refusal=True)], [], 5, "declined"),
        ([Reply(text="")], [], 0, "empty response"),
    ],
)
def test_exit_codes_by_stop_reason(srv, tmp_path, replies, args, code, notice):
    srv.enqueue(*replies)
    r = openheim("run", *args, "go", cwd=tmp_path)
    assert r.returncode == code, r.stderr
    assert notice in r.stderr


def test_provider_error_is_one_line_exit_one(srv, tmp_path):
    srv.enqueue(Fault(status=401, body={"error": {"message": "Incorrect API key provided"}}))
    r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith("Error: HTTP 401") and r.stderr.count("\n") == 1
    assert "API key" in r.stderr and "Traceback" not in r.stderr


def test_missing_key_names_the_variable(isolated_home, tmp_path):
    (isolated_home / "config.toml").write_text(
        'default_provider = "openai"\n[providers.openai]\napi_base = "https://api.openai.com/v1"\n'
        'default_model = "gpt-4o"\nmodels = ["gpt-4o"]\nenv_var = "OPENAI_API_KEY"\n'
    )
    r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 2 and "OPENAI_API_KEY" in r.stderr and r.stderr.count("\n") == 1


def test_missing_config_says_run_init(tmp_path):
    r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 2 and "openheim init" in r.stderr


def test_unknown_model_is_a_config_error(srv, tmp_path):
    r = openheim("run", "--model", "nope", "hi", cwd=tmp_path)
    assert r.returncode == 2 and "Model 'nope' not found" in r.stderr


def test_secret_never_printed_or_logged(srv, tmp_path):
    srv.enqueue(Reply(tool_calls=[ToolCall("list_dir", {})]), Reply(text="ok"))
    r = openheim("run", "-v", "-o", "stream-json", "hi", cwd=tmp_path, env={"OPENHEIM_LOG": "debug"})
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout and SECRET not in r.stderr
    assert srv.requests[0].headers.get("Authorization") == f"Bearer {SECRET}"


def _wait_for_request(srv, n=1, timeout=10):
    deadline = time.monotonic() + timeout
    while len(srv.requests) < n and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_stream_exits_cleanly(srv, tmp_path, sig, code):
    srv.enqueue(Reply(text="word " * 400, delay=0.05))
    proc = spawn("run", "hi", cwd=tmp_path)
    _wait_for_request(srv)
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=10)
    assert time.monotonic() - sent < 3
    assert proc.returncode == code, err
    assert "Traceback" not in err


@pytest.mark.parametrize("gap", [0.0, 0.005, 0.05])
def test_one_ctrl_c_delivered_twice_still_winds_down(srv, tmp_path, isolated_home, gap):
    """The frozen binary's bootloader forwards the terminal's SIGINT: one press can arrive twice."""
    srv.enqueue(Reply(text="word " * 400, delay=0.05))
    proc = spawn("run", "-o", "json", "hi", cwd=tmp_path)
    _wait_for_request(srv)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    time.sleep(gap)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 130, err
    assert json.loads(out)["stop_reason"] == "cancelled"  # it wound down and reported, not cut short
    (meta,) = (isolated_home / "history").glob("*.json")
    assert json.loads(meta.read_text())["meta"]["updated_at"]


def _failure(r) -> dict:
    """The one JSON object a failed `run -o json` prints on stdout."""
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    return json.loads(lines[0])


def test_json_failure_is_one_object_with_error_and_exit_code(srv, tmp_path):
    srv.enqueue(
        Reply(tool_calls=[ToolCall("list_dir", {})], usage=(10, 2)),
        Fault(status=401, body={"error": {"message": "Incorrect API key provided"}}),
    )
    r = openheim("run", "-o", "json", "hi", cwd=tmp_path)
    assert r.returncode == 1
    obj = _failure(r)
    assert set(obj) == {"error", "exit_code", "session_id", "usage", "model", "provider"}
    assert obj["error"] == {"message": r.stderr.strip().removeprefix("Error: "), "kind": "http_error"}
    assert "HTTP 401" in obj["error"]["message"] and obj["exit_code"] == 1
    assert obj["usage"]["input_tokens"] == 10 and obj["usage"]["output_tokens"] == 2
    assert (obj["model"], obj["provider"]) == ("fake-model", "fake")
    assert obj["session_id"] in openheim("sessions", "list").stdout
    srv.enqueue(
        Reply(tool_calls=[ToolCall("list_dir", {})], usage=(10, 2)),
        Fault(status=401, body={"error": {"message": "Incorrect API key provided"}}),
    )
    r = openheim("run", "-o", "stream-json", "hi", cwd=tmp_path)
    assert r.returncode == 1
    last = json.loads(r.stdout.splitlines()[-1])
    assert last.pop("type") == "error" and last.pop("schema_version") == 1
    assert last.pop("message") == last["error"]["message"]  # where schema_version 1 first put it
    assert last.pop("session_id") != obj.pop("session_id")
    assert last == obj  # the two outputs agree


@pytest.mark.parametrize(
    ("args", "kind", "code", "needle"),
    [
        (["hi"], "config_error", 2, "openheim init"),  # no config file: before the turn
        ([], "usage_error", 2, "no prompt given"),
        (["--session", "s1", "--continue", "hi"], "usage_error", 2, "either --session or --continue"),
    ],
)
def test_json_failure_before_the_turn(tmp_path, args, kind, code, needle):
    for output in ("json", "stream-json"):
        r = openheim("run", "-o", output, *args, cwd=tmp_path)
        assert r.returncode == code, r.stderr
        obj = _failure(r)
        if output == "stream-json":
            assert (obj.pop("type"), obj.pop("schema_version")) == ("error", 1)
            assert obj.pop("message") == obj["error"]["message"]
        assert obj["exit_code"] == code and obj["error"]["kind"] == kind and needle in obj["error"]["message"]
        assert set(obj) == {"error", "exit_code"}


def test_json_failure_of_an_unknown_session(srv, tmp_path):
    r = openheim("run", "-o", "json", "--session", "8b3f0c8e-1111-4222-8333-444455556666", "hi", cwd=tmp_path)
    assert r.returncode == 1
    assert _failure(r) == {
        "error": {"message": r.stderr.strip().removeprefix("Error: "), "kind": "not_found"},
        "exit_code": 1,
    }


def test_json_output_of_a_run_stopped_by_sigterm(srv, tmp_path):
    srv.enqueue(Reply(text="word " * 400, delay=0.05))
    proc = spawn("run", "-o", "json", "hi", cwd=tmp_path)
    _wait_for_request(srv)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 143, err
    obj = json.loads(out)
    assert obj["error"] == {"message": "interrupted by SIGTERM", "kind": "interrupted"} and obj["exit_code"] == 143
    assert obj["model"] == "fake-model" and "session_id" in obj


def test_config_help_names_every_fallback():
    help_text = " ".join(openheim("--help").stdout.split())
    assert (
        "--config FILE Config file (default: $OPENHEIM_CONFIG, else $OPENHEIM_HOME/config.toml, else "
        "~/.openheim/config.toml)." in help_text
    ), help_text
