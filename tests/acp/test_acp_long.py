"""Long sessions over ACP with the real client library: compaction updates, /compact, session/load from the
compacted state, and /undo of a turn that wrote through the editor (fs channel) and its terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import write_config
from long_helpers import SUMMARY, SummarisingServer, changing_turn, seed_tree, tree

acp = pytest.importorskip("acp")
from acp import text_block
from acp.schema import WriteTextFileResponse
from test_acp_client import CAPS, FakeEditor, run


class SavingEditor(FakeEditor):
    """An editor that saves what the agent writes through the fs channel to disk (as editors do)."""

    async def write_text_file(self, content: str, path: str, session_id: str, **kw: Any) -> Any:
        await super().write_text_file(content, path, session_id, **kw)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
        return WriteTextFileResponse()


def test_compaction_over_acp_and_load_from_the_compacted_state(isolated_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    editor = FakeEditor()
    with SummarisingServer() as srv:
        write_config(isolated_home, srv.base_url, provider_extra="context_window = 3000")
        state: dict = {}

        async def scenario(conn):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            state["sid"] = sid
            for turn in range(8):
                result = await conn.prompt(session_id=sid, prompt=[text_block(f"turn {turn}: " + "words " * 60)])
                assert result.stop_reason == "end_turn"
            state["automatic"] = len(srv.summary_requests)
            result = await conn.prompt(session_id=sid, prompt=[text_block("/compact")])
            assert result.stop_reason == "end_turn"

        run(scenario, editor, tmp_path)
        commands = [c.name for u in editor.of("available_commands_update") for c in u.available_commands]
        assert {"compact", "undo"} <= set(commands)
        thoughts = [u for u in editor.of("agent_thought_chunk") if "conversation compacted" in u.content.text]
        assert len(thoughts) == state["automatic"] + 1 >= 2
        assert thoughts[-1].field_meta["openheim/compaction"]["manual"] is True
        assert "Compacted:" in editor.text()

        loaded = FakeEditor()

        async def load(conn):
            await conn.load_session(session_id=state["sid"], cwd=str(project), mcp_servers=[])
            await conn.prompt(session_id=state["sid"], prompt=[text_block("after the load")])

        run(load, loaded, tmp_path)
        sent = json.dumps(srv.requests[-1].body["messages"])
        assert SUMMARY.splitlines()[1] in sent and "turn 0:" not in sent
        assert "turn 0:" in "".join(u.content.text for u in loaded.of("user_message_chunk"))  # the full record


def test_undo_over_acp_restores_fs_channel_and_terminal_changes(isolated_home, tmp_path):
    project = tmp_path / "project"
    seed_tree(project)
    project = project.resolve()
    original = tree(project)
    editor = SavingEditor()
    with SummarisingServer() as srv:
        write_config(isolated_home, srv.base_url, extra="allow_shell = true")
        srv.enqueue(*changing_turn())

        async def scenario(conn):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            assert (await conn.prompt(session_id=sid, prompt=[text_block("change files")])).stop_reason == "end_turn"
            assert tree(project) != original
            assert (await conn.prompt(session_id=sid, prompt=[text_block("/undo")])).stop_reason == "end_turn"

        run(scenario, editor, tmp_path, caps=CAPS)
    assert editor.writes and editor.terminal_calls  # the writes went through the editor, the shell through its terminal
    assert tree(project) == original
    assert "Undid turn 1" in editor.text() and "A new/added.txt" in editor.text()
