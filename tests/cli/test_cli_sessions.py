"""Resuming, listing, showing and deleting sessions through the CLI; two processes on one session."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest
from cli_helpers import openheim, spawn, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


def run_json(*args, cwd):
    r = openheim("run", "-o", "json", *args, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_session_and_continue_resume_the_conversation(srv, tmp_path):
    first = run_json("remember the number 7", cwd=tmp_path)
    again = run_json("--session", first["session_id"], "what number?", cwd=tmp_path)
    assert again["session_id"] == first["session_id"]
    sent = srv.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"] or [m["role"] for m in sent] == [
        "user",
        "assistant",
        "user",
    ]
    latest = run_json("--continue", "and again?", cwd=tmp_path)
    assert latest["session_id"] == first["session_id"]
    other = tmp_path / "elsewhere"
    other.mkdir()
    r = openheim("run", "--continue", "hi", cwd=other)
    assert r.returncode == 2 and "no earlier session" in r.stderr


def test_sessions_list_show_delete(srv, tmp_path):
    srv.enqueue(Reply(tool_calls=[ToolCall("list_dir", {})]), Reply(text="two files"))
    sid = run_json("what is here?", cwd=tmp_path)["session_id"]
    listing = openheim("sessions", "list")
    assert sid in listing.stdout and "what is here?" in listing.stdout and "fake-model" in listing.stdout
    metas = json.loads(openheim("sessions", "list", "--json").stdout)
    assert metas[0]["id"] == sid and metas[0]["cwd"] == str(tmp_path)
    shown = openheim("sessions", "show", sid)
    assert (
        "user: what is here?" in shown.stdout and "list_dir" in shown.stdout and "assistant: two files" in shown.stdout
    )
    full = json.loads(openheim("sessions", "show", "--json", sid).stdout)
    assert [m["role"] for m in full["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert openheim("sessions", "delete", sid).returncode == 0
    gone = openheim("sessions", "show", sid)
    assert gone.returncode == 1 and "not found" in gone.stderr
    assert openheim("sessions", "show", "nonsense").returncode == 2


def test_unknown_session_id(srv, tmp_path):
    r = openheim("run", "--session", "8b3f0c8e-1111-4222-8333-444455556666", "hi", cwd=tmp_path)
    assert r.returncode == 1 and "not found" in r.stderr


def test_second_process_on_a_session_fails_fast_then_succeeds(srv, tmp_path):
    sid = run_json("start", cwd=tmp_path)["session_id"]
    srv.enqueue(Reply(text="slow " * 60, delay=0.05))
    first = spawn("run", "--session", sid, "long one", cwd=tmp_path)
    deadline = time.monotonic() + 10
    while len(srv.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    second = openheim("run", "--session", sid, "me too", cwd=tmp_path)
    assert time.monotonic() - started < 5
    assert second.returncode == 1
    assert (
        f"session {sid} is active in another process (pid {first.pid} on {socket.gethostname()}" in second.stderr
        or f"pid {first.pid}" in second.stderr
    )
    first.communicate(timeout=20)
    assert first.returncode == 0
    assert openheim("run", "--session", sid, "me too", cwd=tmp_path).returncode == 0


def test_stale_lock_of_a_dead_process_is_taken_over(srv, tmp_path, isolated_home):
    sid = run_json("start", cwd=tmp_path)["session_id"]
    lock = isolated_home / "history" / f"{sid}.lock"
    lock.write_text(
        json.dumps(
            {
                "pid": 2**22 + 12345,
                "hostname": socket.gethostname(),
                "acquired_at": "2026-01-01T00:00:00Z",
                "process_start": 1,
            }
        )
    )
    assert openheim("run", "--session", sid, "again", cwd=tmp_path).returncode == 0
    assert not lock.exists()
    assert os.path.exists(isolated_home / "history" / f"{sid}.jsonl")


def test_one_sessions_bad_metadata_breaks_neither_list_nor_continue(srv, tmp_path, isolated_home):
    """A non-string updated_at (or other non-string field) skips that session with a warning."""
    good = run_json("the good one", cwd=tmp_path)["session_id"]
    bad = run_json("the bad one", cwd=tmp_path)["session_id"]
    path = isolated_home / "history" / f"{bad}.json"
    doc = json.loads(path.read_text())
    doc["meta"]["updated_at"] = 5
    path.write_text(json.dumps(doc))
    listing = openheim("sessions", "list")
    assert listing.returncode == 0, listing.stderr
    assert good in listing.stdout and bad not in listing.stdout
    assert "skipping" in listing.stderr and str(path) in listing.stderr and "updated_at" in listing.stderr
    assert json.loads(openheim("sessions", "list", "--json").stdout)[0]["id"] == good
    assert run_json("--continue", "again", cwd=tmp_path)["session_id"] == good
