"""The memory tools: exact outputs, limits, capabilities."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from memory_fakes import FakeEmbedder

from openheim.core.tools import ToolHandler, ToolRegistry
from openheim.core.turn_context import TurnContext
from openheim.errors import ToolExecutionError
from openheim.memory.long_term import LongTermMemory
from openheim.memory.store import Hit
from openheim.memory.tools import format_hit, format_hits, memory_tools

TODAY = datetime.now(UTC).strftime("%Y-%m-%d")


@pytest.fixture
def ltm(tmp_path):
    memory = LongTermMemory(tmp_path / "memory.db")
    yield memory
    memory.close()


@pytest.fixture
def registry(ltm):
    return ToolRegistry(memory_tools(ltm))


def call(registry: ToolRegistry, name: str, **args) -> str:
    return registry.execute(name, json.dumps(args), TurnContext())


def test_the_four_tools_and_their_capabilities(ltm):
    tools = {t.name: t for t in memory_tools(ltm)}
    assert sorted(tools) == ["edit_memory", "forget", "remember", "search_memory"]
    assert all(isinstance(t, ToolHandler) for t in tools.values())
    caps = {n: (t.capabilities.read_only, t.capabilities.kind) for n, t in tools.items()}
    assert caps == {
        "remember": (False, "think"),
        "search_memory": (True, "search"),
        "edit_memory": (False, "edit"),
        "forget": (False, "delete"),
    }
    assert all(t.capabilities.approval_scope == "tool_name" for t in tools.values())
    assert tools["edit_memory"].parameters["required"] == ["id", "content"]
    assert tools["search_memory"].parameters["properties"]["top_k"]["maximum"] == 20


def test_search_description_names_the_mode(tmp_path):
    keyword = {t.name: t for t in memory_tools(LongTermMemory(tmp_path / "a.db"))}["search_memory"]
    semantic = {t.name: t for t in memory_tools(LongTermMemory(tmp_path / "b.db", FakeEmbedder()))}["search_memory"]
    assert "keyword" in keyword.description and "semantic" not in keyword.description
    assert "semantic" in semantic.description and "meaning" in semantic.description


def test_remember(registry):
    assert call(registry, "remember", content="  the user prefers tabs  ") == "Remembered as memory #1."
    assert call(registry, "remember", content="second") == "Remembered as memory #2."


def test_remember_limits(registry, ltm):
    assert call(registry, "remember", content="x" * 4000) == "Remembered as memory #1."
    with pytest.raises(ToolExecutionError) as e:
        call(registry, "remember", content="x" * 4001)
    assert e.value.message == "note is longer than 4000 characters; split it into smaller notes"
    with pytest.raises(ToolExecutionError) as e:
        call(registry, "remember", content="   ")
    assert (
        e.value.message == "failed to parse arguments: expected non-empty text, got an empty string (field `content`)"
    )
    with pytest.raises(ToolExecutionError) as e:
        call(registry, "remember")
    assert e.value.message == "failed to parse arguments: missing field `content`"
    with pytest.raises(ToolExecutionError, match="expected a string"):
        call(registry, "remember", content=5)
    assert ltm.count() == 1


def test_search_memory_outputs(registry):
    assert (
        call(registry, "search_memory", query="anything")
        == "Long-term memory is empty; nothing has been remembered yet."
    )
    call(registry, "remember", content="the user's editor is vim")
    call(registry, "remember", content="  deploys are on Tuesdays\n")
    assert call(registry, "search_memory", query="emacs") == "No relevant memories found."
    one = call(registry, "search_memory", query="deploys")
    assert re.fullmatch(rf"Found 1 memory:\n\n\[#2\] {TODAY} \(keyword match #1\)\ndeploys are on Tuesdays", one)
    two = call(registry, "search_memory", query="editor tuesdays")
    assert two.startswith("Found 2 memories:\n\n[#")
    assert f"] {TODAY} (keyword match #1)" in two and f"] {TODAY} (keyword match #2)" in two


def test_search_memory_semantic_output(tmp_path):
    registry = ToolRegistry(memory_tools(LongTermMemory(tmp_path / "m.db", FakeEmbedder())))
    call(registry, "remember", content="my car is blue")
    out = call(registry, "search_memory", query="automobile", top_k=1)
    assert re.fullmatch(rf"Found 1 memory:\n\n\[#1\] {TODAY} \(similarity 0\.\d\d\d\)\nmy car is blue", out)


def test_search_memory_top_k_is_clamped(registry, ltm):
    for i in range(25):
        ltm.remember(f"note number {i}")
    assert call(registry, "search_memory", query="note", top_k=0).startswith("Found 1 memory:")
    assert call(registry, "search_memory", query="note", top_k=-3).startswith("Found 1 memory:")
    assert call(registry, "search_memory", query="note", top_k=100).startswith("Found 20 memories:")
    assert call(registry, "search_memory", query="note").startswith("Found 5 memories:")
    assert call(registry, "search_memory", query="note", top_k="3").startswith("Found 3 memories:")
    with pytest.raises(ToolExecutionError, match="expected an integer"):
        call(registry, "search_memory", query="note", top_k="many")
    with pytest.raises(ToolExecutionError, match="expected non-empty text"):
        call(registry, "search_memory", query=" ")


def test_edit_memory(registry, ltm):
    call(registry, "remember", content="office in Berlin")
    assert call(registry, "edit_memory", id=1, content="office in Lisbon") == "Updated memory #1."
    assert ltm.get(1).content == "office in Lisbon"
    assert call(registry, "edit_memory", id=7, content="x") == "No memory #7 exists; nothing to edit."
    with pytest.raises(ToolExecutionError, match="longer than 4000"):
        call(registry, "edit_memory", id=1, content="y" * 4001)
    with pytest.raises(ToolExecutionError, match="missing field `id`"):
        call(registry, "edit_memory", content="x")
    with pytest.raises(ToolExecutionError, match="expected an integer"):
        call(registry, "edit_memory", id=True, content="x")


def test_forget(registry, ltm):
    call(registry, "remember", content="temporary")
    assert call(registry, "forget", id=1) == "Forgot memory #1."
    assert call(registry, "forget", id=1) == "No memory #1 exists; nothing to forget."
    assert ltm.count() == 0


def test_format_hit_trims_and_dates_in_utc():
    hit = Hit(3, "  text\n", datetime(2024, 2, 29, 23, 30, tzinfo=UTC), 12.3456, "rank")
    assert format_hit(hit) == "[#3] 2024-02-29 (keyword match #1)\ntext"
    sim = Hit(4, "t", datetime(2024, 1, 1, tzinfo=UTC), 0.91234, "similarity")
    assert format_hits([sim]) == "Found 1 memory:\n\n[#4] 2024-01-01 (similarity 0.912)\nt"
    assert format_hits([]) == "No relevant memories found."


def test_database_failures_become_tool_errors(tmp_path):
    (tmp_path / "dir.db").mkdir()
    registry = ToolRegistry(memory_tools(LongTermMemory(tmp_path / "dir.db")))
    with pytest.raises(ToolExecutionError, match="cannot open the memory database"):
        call(registry, "remember", content="x")
