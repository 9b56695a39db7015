"""SIGKILL `openheim run` at random points of a multi-tool turn: history stays loadable and resumable."""

from __future__ import annotations

import json
import random
import signal
import time

import pytest
from cli_helpers import openheim, spawn, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim.conversation.history import HistoryManager

KILLS = 50


def script() -> list[Reply]:
    """Four iterations, each one shell call that appends its id to calls.log, then a final answer."""
    replies = [
        Reply(
            tool_calls=[ToolCall("execute_command", {"command": f"echo call_{i} >> calls.log"}, id=f"call_{i}")],
            delay=0.004,
        )
        for i in range(4)
    ]
    return [*replies, Reply(text="all four calls done " * 20, delay=0.004)]


def reference_conversation(home, tmp_path):
    """A complete, unkilled run of the same script: what every prefix is checked against, and how long it took
    (the kills land within that time, so a busy machine does not push them all before the session starts)."""
    work = tmp_path / "reference"
    work.mkdir()
    with FakeLLMServer(wire="openai") as srv:
        write_config(home, srv.base_url, extra="allow_shell = true")
        srv.enqueue(*script())
        started = time.monotonic()
        r = openheim("run", "-o", "json", "go", cwd=work)
        took = time.monotonic() - started
        assert r.returncode == 0, r.stderr
        session_id = json.loads(r.stdout)["session_id"]
    return HistoryManager(home / "history").load(session_id).messages, took


def newest_session(home) -> str | None:
    metas = HistoryManager(home / "history").list()
    return metas[0].id if metas else None


@pytest.mark.slow
def test_kill_at_random_points_then_resume(isolated_home, tmp_path):
    messages, took = reference_conversation(isolated_home, tmp_path)
    expected = [m.to_dict() for m in messages]
    rng = random.Random(1234)
    history = HistoryManager(isolated_home / "history")
    stored_lengths = []
    for attempt in range(KILLS):
        work = tmp_path / f"w{attempt}"
        work.mkdir()
        with FakeLLMServer(wire="openai") as srv:
            write_config(isolated_home, srv.base_url, extra="allow_shell = true")
            srv.enqueue(*script())
            before = {m.id for m in history.list()}
            proc = spawn("run", "go", cwd=work)
            time.sleep(rng.uniform(0.3, 1.1) * max(took, 1.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            proc.stdout.close()
            proc.stderr.close()
            new = [m.id for m in history.list() if m.id not in before]
            if not new:
                continue  # killed before the session was created
            conv = history.load(new[0])
            got = [m.to_dict() for m in conv.messages]
            stored_lengths.append(len(got))
            assert got == expected[: len(got)], f"attempt {attempt}: stored messages are not a prefix"
            calls_log = work / "calls.log"
            results = {m.content[0].tool_call_id for m in conv.messages if m.role == "tool"}
        with FakeLLMServer(wire="openai") as srv:  # a fresh script: the killed run's leftovers are gone
            write_config(isolated_home, srv.base_url, extra="allow_shell = true")
            srv.enqueue(Reply(text="resumed fine"))
            r = openheim("run", "--session", new[0], "carry on", cwd=work)
            assert r.returncode == 0, f"attempt {attempt}: {r.stderr}"
            assert r.stdout == "resumed fine\n"
            sent = srv.requests[-1].body["messages"]
            calls = {c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls", [])}
            answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
            assert calls <= answered, f"attempt {attempt}: a tool call was left without a result"
            # a shell child orphaned by the kill may still finish its write; none may run twice
            ran = calls_log.read_text().split() if calls_log.exists() else []
            assert len(ran) == len(set(ran)), f"attempt {attempt}: a call ran twice: {ran}"
            assert results <= set(ran)
    # the kills must land all over the turn, not only before it started
    assert len(stored_lengths) >= KILLS // 2 and len(set(stored_lengths)) >= 4, stored_lengths
