"""200-turn conversations with big tool results against servers that reject oversized requests."""

from __future__ import annotations

import re

import pytest
from cli_helpers import write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim.client import OpenheimClient
from openheim.core.models import StopReason

TURNS = 200
LIMIT = 60_000  # bytes per request the fake server accepts
NOTE = re.compile(r"\[(\d+) earlier messages omitted to fit the context window\]")


def tool_pairs_intact(wire: str, body: dict) -> bool:
    """Every tool result in the request has its call in the same request."""
    if wire == "openai":
        calls = {c["id"] for m in body["messages"] for c in m.get("tool_calls") or []}
        results = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
        return all(r in calls for r in results)
    if wire == "anthropic":
        blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
        calls = {b["id"] for b in blocks if b["type"] == "tool_use"}
        return all(b["tool_use_id"] in calls for b in blocks if b["type"] == "tool_result")
    first = body["contents"][0]["parts"]
    return not any("functionResponse" in p for p in first)


def omitted(wire: str, body: dict) -> int | None:
    text = str(body.get("messages") or body.get("contents"))
    match = NOTE.search(text)
    return int(match.group(1)) if match else None


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
def test_long_conversation_is_fitted_not_failed(wire, isolated_home, tmp_path):
    (tmp_path / "big.txt").write_text("lorem ipsum dolor sit amet\n" * 300)  # ~8 KB per tool result
    with FakeLLMServer(wire=wire, max_request_bytes=LIMIT) as srv:
        write_config(isolated_home, srv.base_url, kind="openai_compatible" if wire == "openai" else wire)
        client = OpenheimClient.builder().build()
        session = client.new_session(tmp_path)
        for turn in range(TURNS):
            srv.enqueue(
                Reply(tool_calls=[ToolCall("read_file", {"path": "big.txt"}, id=f"c{turn}")]),
                Reply(text=f"read it, turn {turn}"),
            )
            result = session.prompt(f"turn {turn}: read big.txt again")
            assert result.stop_reason == StopReason.END_TURN, f"turn {turn}"
        accepted = [r for r in srv.requests if len(r.raw) <= LIMIT]
        assert len(accepted) == 2 * TURNS
        last = accepted[-1].body
        stored = len(client.stored_session(session.id)[1])
        dropped = omitted(wire, last)
        assert dropped is not None and dropped > 0
        assert all(tool_pairs_intact(wire, r.body) for r in accepted)
        # what was left out plus what was sent is the whole stored conversation (the final reply not yet in it)
        if wire == "openai":
            assert dropped + len(last["messages"]) - 1 == stored - 1  # minus the system message
        elif wire == "anthropic":
            assert dropped + len(last["messages"]) == stored - 1
        assert stored == 4 * TURNS
