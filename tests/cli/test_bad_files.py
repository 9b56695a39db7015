"""Bad files and arguments end as one clear line, never an internal error or a hang, and never lose the rest
of a session: a deeply nested profile, damaged session-log lines, a bad api_base, a config that is a FIFO, an
api_base with a query, a NUL byte in a path argument."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cli_helpers import ROOT, openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

DEEP = 100_000


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


def one_line(stderr: str) -> str:
    assert stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    return stderr


def test_a_deeply_nested_profile_is_skipped_with_one_warning(srv, isolated_home, tmp_path):
    (isolated_home / "agents").mkdir()
    (isolated_home / "agents" / "deep.md").write_text("+++\ntools = " + "[" * DEEP + "]" * DEEP + "\n+++\nHi.\n")
    (isolated_home / "agents" / "fine.md").write_text('+++\ndescription = "works"\n+++\nHi.\n')
    r = openheim("run", "hello", cwd=tmp_path)
    assert r.returncode == 0
    line = one_line(r.stderr)
    assert "skipping subagent profile" in line and "deep.md" in line and "nested too deeply" in line
    delegate = next(t for t in srv.requests[0].body["tools"] if t["function"]["name"] == "delegate_task")
    assert "`fine`" in delegate["function"]["description"]


def test_damaged_session_log_lines_are_skipped_and_the_session_goes_on(srv, isolated_home, tmp_path):
    sid = json.loads(openheim("run", "-o", "json", "remember 7", cwd=tmp_path).stdout)["session_id"]
    log = next(isolated_home.rglob(f"{sid}*.jsonl"))
    good = log.read_bytes()
    bad = [
        b'{"role": "user", "content": [{"type": "text", "text": 5}]}',
        b'{"role": "tool", "content": [{"type": "tool_result", "tool_call_id": "x", "tool_name": "t", '
        b'"content": {"an": "object"}}]}',
        b'{"role": "user", "content": ' + b"[" * DEEP + b"]" * DEEP + b"}",
    ]
    log.write_bytes(good + b"\n".join(bad) + b"\n")
    shown = openheim("sessions", "show", sid)
    assert shown.returncode == 0 and "user: remember 7" in shown.stdout, shown.stderr
    warnings = shown.stderr.strip().splitlines()
    assert len(warnings) == 3 and all("skipping line" in w and str(log) in w for w in warnings), shown.stderr
    assert "Traceback" not in shown.stderr and "internal error" not in shown.stderr
    again = openheim("run", "-o", "json", "--session", sid, "what number?", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    sent = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent == ["remember 7", "what number?"]
    assert log.read_bytes().startswith(good + b"\n".join(bad) + b"\n")  # the damaged lines were kept


def test_an_unclosed_ipv6_api_base_is_a_config_error(isolated_home, tmp_path):
    write_config(isolated_home, "http://[::1")
    r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 2
    assert "api_base 'http://[::1' is not a valid URL" in one_line(r.stderr)


def test_a_config_that_is_a_fifo_is_refused_at_once(isolated_home, tmp_path):
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    r = openheim("--config", str(fifo), "run", "hi", cwd=tmp_path, timeout=20)
    assert r.returncode == 2 and "is not a regular file" in one_line(r.stderr)
    project = tmp_path / "p"
    (project / ".openheim").mkdir(parents=True)
    os.mkfifo(project / ".openheim" / "settings.toml")
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        r = openheim("run", "hi", cwd=project, timeout=20)
    assert r.returncode == 0 and r.stdout == "echo: hi\n", r.stderr  # not a settings file: not read at all


def test_an_api_base_with_a_query_keeps_it_a_query(isolated_home, tmp_path):
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url + "?key=k-SECRET&api-version=2")
        r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    path = srv.requests[0].path
    assert path.startswith("/v1/chat/completions?") and srv.requests[0].query == {
        "key": ["k-SECRET"],
        "api-version": ["2"],
    }, path


def test_a_nul_byte_in_a_path_argument_is_one_line(srv, tmp_path):
    srv.enqueue(
        Reply(
            tool_calls=[
                ToolCall("read_file", {"path": "a\u0000b"}, id="r"),
                ToolCall("write_file", {"path": "x\u0000.openheim", "content": "c"}, id="w"),
            ]
        ),
        Reply(text="done"),
    )
    r = openheim("run", "-v", "--deny", "read_file(secret*)", "go", cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    results = [m["content"] for m in srv.requests[1].body["messages"] if m["role"] == "tool"]
    assert all("NUL" in x or "null" in x.lower() for x in results), results
    e = openheim("permissions", "explain", "read_file", '{"path": "a\\u0000b"}', cwd=tmp_path)
    assert e.returncode in (0, 2) and "internal error" not in e.stderr and "Traceback" not in e.stderr, e.stderr
    assert e.stdout or one_line(e.stderr)


def test_a_config_fifo_never_blocks_the_library(tmp_path):
    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)
    code = (
        "from openheim.config.load import load_config\n"
        f"try:\n    load_config({str(fifo)!r})\nexcept Exception as e:\n    print(type(e).__name__)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=20,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.stdout == "ConfigError\n", r.stderr
