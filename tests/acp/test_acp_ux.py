"""ACP with the real client library: a cancelled reply comes back on session/load, marked as interrupted; the
update_plan tool's state goes out as `plan` session updates (checked against the ACP schema by the tap)."""

from __future__ import annotations

import asyncio

import pytest
from fake_llm import Reply, ToolCall

acp = pytest.importorskip("acp")
from acp import text_block
from test_acp_client import FakeEditor, run


def test_a_cancelled_reply_is_replayed_by_session_load(srv, project, tmp_path):
    srv.enqueue(Reply(text="partial " * 300 + "NEVER", delay=0.02))
    ids: dict = {}

    async def cancel_mid_stream(conn):
        ids["sid"] = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        task = asyncio.ensure_future(conn.prompt(session_id=ids["sid"], prompt=[text_block("talk")]))
        for _ in range(300):
            if editor.text().count("partial") >= 5:
                break
            await asyncio.sleep(0.01)
        await conn.cancel(session_id=ids["sid"])
        assert (await task).stop_reason == "cancelled"

    editor = FakeEditor()
    run(cancel_mid_stream, editor, tmp_path)
    second = FakeEditor()

    async def reload(conn):
        await conn.load_session(cwd=str(project), session_id=ids["sid"], mcp_servers=[])

    run(reload, second, tmp_path)
    replayed = second.text()
    assert replayed.startswith("partial partial") and "NEVER" not in replayed
    assert "[Reply interrupted: stopped by the user." in replayed


def test_update_plan_goes_out_as_plan_updates(srv, project, tmp_path):
    first = {"plan": [{"step": "look", "status": "in_progress"}, {"step": "fix", "status": "pending"}]}
    second = {
        "plan": [{"step": "look", "status": "completed"}, {"step": "fix", "status": "in_progress"}],
        "explanation": "looked",
    }
    srv.enqueue(
        Reply(tool_calls=[ToolCall("update_plan", first)]),
        Reply(tool_calls=[ToolCall("update_plan", second)]),
        Reply(text="done"),
    )
    editor = FakeEditor()

    async def scenario(conn):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("plan it")])).stop_reason == "end_turn"

    run(scenario, editor, tmp_path)
    plans = [[(e.content, e.status, e.priority) for e in u.entries] for u in editor.of("plan")]
    assert plans == [
        [("look", "in_progress", "medium"), ("fix", "pending", "medium")],
        [("look", "completed", "medium"), ("fix", "in_progress", "medium")],
    ]
    assert not editor.asked  # a read-only tool: no permission question
