"""`openheim run --record` / `--replay` and the `replay` provider kind, end to end on all three wires.

A run with tool calls (several iterations, a subagent, a retried 429) is recorded against the fake
server; the server is stopped and the recording replayed: the same stdout, no socket, and a changed
request refused in one line.
"""

from __future__ import annotations

import json
import re
import signal
import time

import pytest
from cli_helpers import openheim, spawn, write_config
from fake_llm import FakeLLMServer, Fault, Reply, ToolCall

SECRET = "sk-test-SECRET-123"
PROMPT = "what do my notes say?"
WIRES = ("openai", "anthropic", "gemini")
FAST_RETRY = {"OPENHEIM_RETRY_BASE_DELAY": "0.01"}


def script(srv: FakeLLMServer) -> None:
    """Five LLM calls: read_file, delegate_task, the subagent's, list_dir after a retried 429, the answer."""
    srv.enqueue(
        Reply(
            text="Let me look. ", tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="c1")], usage=(100, 10)
        ),
        Reply(
            tool_calls=[ToolCall("delegate_task", {"system_prompt": "You check notes.", "task": "Say ok"}, id="c2")],
            usage=(120, 12),
        ),
        Reply(text="ok from the subagent", usage=(30, 3)),
        Fault(status=429, retry_after=0),
        Reply(tool_calls=[ToolCall("list_dir", {"path": "."}, id="c3")], usage=(140, 14)),
        Reply(text="It says 42.", usage=(160, 16)),
    )


@pytest.fixture
def work(tmp_path):
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    return tmp_path


def record(home, work, wire: str, *args: str) -> tuple[str, object]:
    """Record the scripted run; the fake server is stopped when this returns. (stdout, recording path)"""
    rec = work / f"{wire}.jsonl"
    with FakeLLMServer(wire=wire) as srv:
        write_config(home, srv.base_url, kind=wire)
        script(srv)
        r = openheim("run", PROMPT, "--record", str(rec), *args, cwd=work, env=FAST_RETRY)
        assert r.returncode == 0, r.stderr
        assert len(srv.requests) == 6
    return r.stdout, rec


def without_ids(out: str, wire: str) -> str:
    """What openheim itself makes up differs between runs: the new session's id, and on Gemini (whose wire
    has no call ids) the tool call ids."""
    out = re.sub(r'"session_id": ?"[^"]+"', '"session_id": "-"', out)
    return re.sub(r"call_[0-9a-f]{32}", "call_-", out) if wire == "gemini" else out


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("output", ["text", "json", "stream-json"])
def test_replay_prints_what_the_recorded_run_printed(isolated_home, work, wire, output):
    recorded, rec = record(isolated_home, work, wire, "-o", output)
    assert SECRET not in rec.read_text()
    # the server is gone: any request that reached the network would fail with "connection refused"
    r = openheim("run", PROMPT, "--replay", str(rec), "-o", output, cwd=work, env=FAST_RETRY)
    assert r.returncode == 0, r.stderr
    if output == "text":
        assert r.stdout == recorded == "Let me look. It says 42.\n"
    else:
        assert without_ids(r.stdout, wire) == without_ids(recorded, wire)
        assert r.stdout != recorded  # a new session each run: the ids differ, nothing else
    if output == "stream-json":
        lines = [json.loads(line) for line in r.stdout.splitlines()]
        assert [e["type"] for e in lines].count("iteration_start") == 4
        delegated = next(e for e in lines if e["type"] == "tool_result" and e["tool_name"] == "delegate_task")
        assert delegated["result"] == "ok from the subagent"  # the subagent's own call was replayed too


def test_recording_format_and_no_secret(isolated_home, work):
    _, rec = record(isolated_home, work, "gemini")
    text = rec.read_text()
    assert SECRET not in text
    header, *lines = [json.loads(line) for line in text.splitlines()]
    assert header == {
        "openheim_recording": 1,
        "provider": "fake",
        "kind": "gemini",
        "model": "fake-model",
        "thinking": False,
        "max_tokens": None,
    }
    assert len(lines) == 6  # 5 successful calls (one of them the subagent's) and the 429 before a retry
    assert [x["response"]["status"] for x in lines] == [200, 200, 200, 429, 200, 200]
    assert lines[3]["request"]["body"] == lines[4]["request"]["body"]  # the retry asked the same again
    first = lines[0]["request"]
    assert first["path"] == "/v1beta/models/fake-model:streamGenerateContent"
    assert first["headers"]["x-goog-api-key"] == "<redacted>"
    assert first["body"]["contents"][0]["parts"][0]["text"] == PROMPT
    assert lines[0]["response"]["headers"]["content-type"].startswith("text/event-stream")
    assert lines[0]["response"]["body"].startswith("data: ")


def test_changed_prompt_is_refused_in_one_line(isolated_home, work):
    _, rec = record(isolated_home, work, "openai")
    r = openheim("run", "what do my notes mean?", "--replay", str(rec), cwd=work)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("Error: Replay: request 1 differs from recording ")
    assert 'messages[1].content: recorded "what do my notes say?", this run "what do my notes mean?"' in r.stderr
    assert "record it again with openheim run --record" in r.stderr
    j = openheim("run", "what do my notes mean?", "--replay", str(rec), "-o", "json", cwd=work)
    obj = json.loads(j.stdout)
    assert j.returncode == obj["exit_code"] == 2
    assert obj["error"]["kind"] == "replay_mismatch"


def test_a_changed_tool_result_is_found_in_a_later_request(isolated_home, work):
    _, rec = record(isolated_home, work, "anthropic")
    (work / "notes.txt").write_text("the answer is 43\n")
    r = openheim("run", PROMPT, "--replay", str(rec), cwd=work)
    assert r.returncode == 2
    assert re.search(
        r"request 2 differs from recording .*messages\[2\]\.content\[0\]\.content: recorded "
        r"\"[^\"]*42",
        r.stderr,
    ), r.stderr
    assert r.stdout == "Let me look. "  # what was served before the difference


def test_more_requests_than_recorded_and_a_torn_recording(isolated_home, work):
    _, rec = record(isolated_home, work, "openai")
    lines = rec.read_bytes().split(b"\n")
    rec.write_bytes(b"\n".join(lines[:3]) + b"\n")  # header + 2 exchanges
    r = openheim("run", PROMPT, "--replay", str(rec), cwd=work)
    assert r.returncode == 2
    assert f"request 3 is not in recording {rec} (it holds 2 exchanges); record it again" in r.stderr
    rec.write_bytes(b"\n".join(lines[:3]) + b"\n" + lines[3][:40])  # a crash mid-write: a torn last line
    r = openheim("run", PROMPT, "--replay", str(rec), cwd=work)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "(it holds 2 exchanges; its last line is incomplete: the recorded run was cut off)" in r.stderr


def test_a_run_killed_mid_recording_leaves_a_readable_prefix(isolated_home, work):
    rec = work / "killed.jsonl"
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, kind="openai")
        srv.enqueue(
            Reply(text="Looking. ", tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="c1")]),
            Reply(text="never sent", head_delay=30),
        )
        proc = spawn("run", PROMPT, "--record", str(rec), cwd=work)
        try:
            deadline = time.monotonic() + 20
            while len(srv.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(srv.requests) == 2  # the second request is waiting for its reply
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=10)
    header, exchange = [json.loads(line) for line in rec.read_text().splitlines()]
    assert header["kind"] == "openai" and exchange["response"]["status"] == 200
    r = openheim("run", PROMPT, "--replay", str(rec), cwd=work)
    assert (r.returncode, r.stdout) == (2, "Looking. ")
    assert f"request 2 is not in recording {rec} (it holds 1 exchange); record it again" in r.stderr


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"", "is empty (the recorded run ended before its first request)"),
        (b'{"not": "a recording"}\n', "is not an openheim recording"),
        (b'{"openheim_recording": 1, "kind": "openai"}\n{oops\n{}\n', "line 2 of recording"),
        (b'{"openheim_recording": 9, "kind": "openai"}\n', "has format version 9"),
        (b'{"openheim_recording": 1, "kind": "openai"}\n"\xff"\n', "line 2 of recording"),
        (b'{"openheim_recording": 1, "kind": "openai"}\n{"request": {}}\n', "line 2 of recording"),
    ],
)
def test_unreadable_recordings_are_one_line_config_errors(isolated_home, work, content, needle):
    write_config(isolated_home, "http://127.0.0.1:9/v1", kind="openai")
    rec = work / "bad.jsonl"
    rec.write_bytes(content)
    r = openheim("run", PROMPT, "--replay", str(rec), cwd=work)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr


def test_replay_of_another_wire_is_refused(isolated_home, work):
    _, rec = record(isolated_home, work, "anthropic")
    write_config(isolated_home, "http://127.0.0.1:9/v1", kind="openai")
    r = openheim("run", PROMPT, "--replay", str(rec), cwd=work)
    assert r.returncode == 2
    assert "was made with a anthropic provider and this run uses openai" in r.stderr


def test_replay_opens_no_socket_even_when_the_server_is_up(isolated_home, work):
    rec = work / "rec.jsonl"
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, kind="openai")
        srv.enqueue(Reply(text="recorded answer"))
        assert openheim("run", PROMPT, "--record", str(rec), cwd=work).returncode == 0
        r = openheim("run", PROMPT, "--replay", str(rec), cwd=work)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "recorded answer\n"
        assert len(srv.requests) == 1


def test_replay_needs_no_api_key(isolated_home, work, monkeypatch):
    recorded, rec = record(isolated_home, work, "openai")
    (isolated_home / "config.toml").write_text(
        'default_provider = "fake"\n[providers.fake]\nkind = "openai"\napi_base = "https://api.openai.com/v1"\n'
        'default_model = "fake-model"\nenv_var = "OPENAI_API_KEY"\n'
    )
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert "needs an API key" in openheim("run", PROMPT, cwd=work).stderr
    r = openheim("run", PROMPT, "--replay", str(rec), cwd=work, env=FAST_RETRY)
    assert r.returncode == 0, r.stderr
    assert r.stdout == recorded


def test_replay_provider_kind_in_config(isolated_home, work):
    recorded, rec = record(isolated_home, work, "gemini")
    (isolated_home / "config.toml").write_text(
        f'default_provider = "canned"\n[providers.canned]\nkind = "replay"\nrecording = "{rec}"\n'
    )
    r = openheim("run", PROMPT, cwd=work, env=FAST_RETRY)
    assert r.returncode == 0, r.stderr
    assert r.stdout == recorded
    r = openheim("run", PROMPT, "-o", "json", cwd=work, env=FAST_RETRY)
    obj = json.loads(r.stdout)
    assert (obj["provider"], obj["model"], obj["text"]) == ("canned", "fake-model", "It says 42.")
    (isolated_home / "config.toml").write_text('default_provider = "c"\n[providers.c]\nkind = "replay"\n')
    r = openheim("run", PROMPT, cwd=work)
    assert r.returncode == 2 and "has kind = \"replay\" but no 'recording'" in r.stderr


def test_replay_provider_from_the_library_builder(isolated_home, work, monkeypatch):
    from openheim import OpenheimClient

    _, rec = record(isolated_home, work, "anthropic")
    (isolated_home / "config.toml").unlink()
    monkeypatch.setenv("OPENHEIM_RETRY_BASE_DELAY", "0.01")
    for _ in range(2):  # every build starts the recording from its first exchange
        client = OpenheimClient.builder().provider("replay").replay(rec).data_dir(isolated_home / "lib-data").build()
        with client:
            result = client.new_session(cwd=work).prompt(PROMPT)
        assert result.final_response == "It says 42."
        assert result.iterations_used == 4
    client = OpenheimClient.builder().provider("replay").replay(rec).data_dir(isolated_home / "lib-data").build()
    with client:
        from openheim.errors import ReplayMismatch

        with pytest.raises(ReplayMismatch, match="request 1 differs"):
            client.new_session(cwd=work).prompt("something else")


def test_record_and_replay_together_is_a_usage_error(isolated_home, work):
    write_config(isolated_home, "http://127.0.0.1:9/v1", kind="openai")
    r = openheim("run", PROMPT, "--record", "a.jsonl", "--replay", "b.jsonl", cwd=work)
    assert r.returncode == 2 and "use either --record or --replay" in r.stderr


def test_query_keys_and_key_headers_never_reach_a_recording():
    from openheim.core.llm.http import Tap
    from openheim.core.llm.tape import exchange

    tap = Tap(
        "https://example.com/v1beta/models/m:streamGenerateContent?alt=sse&key=AIzaSECRET",
        {"Authorization": "Bearer x", "x-api-key": "y", "Accept": "text/event-stream"},
        {"a": 1},
    )
    line = exchange(tap)
    assert line["request"]["query"] == "alt=sse&key=%3Credacted%3E"
    assert line["request"]["headers"] == {
        "Authorization": "<redacted>",
        "x-api-key": "<redacted>",
        "Accept": "text/event-stream",
    }
    assert "AIzaSECRET" not in json.dumps(line)


def test_a_replayed_retry_does_not_wait(isolated_home, work):
    rec = work / "retry.jsonl"
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, kind="openai")
        srv.enqueue(Fault(status=503, retry_after=4), Reply(text="after the wait"))
        started = time.monotonic()
        live = openheim("run", PROMPT, "--record", str(rec), cwd=work)
        assert live.returncode == 0 and time.monotonic() - started >= 4
    started = time.monotonic()
    r = openheim("run", PROMPT, "--replay", str(rec), cwd=work)
    assert time.monotonic() - started < 3.5
    assert (r.returncode, r.stdout) == (0, "after the wait\n")
    assert "Retrying in 4 s" in r.stderr  # the same decision, logged the same way
