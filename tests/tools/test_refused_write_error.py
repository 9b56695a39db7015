"""A write the system refuses reaches the model as a sentence, not a bare "[Errno 22] Invalid argument"."""

from __future__ import annotations

import errno
import json

from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim import OpenheimClient, tool


@tool
def save_note(name: str) -> str:
    """Save a note (the file system refuses it, as a sandbox or an odd file system does)."""
    raise OSError(errno.EINVAL, "Invalid argument", name)


def test_a_refused_write_is_reported_as_a_sentence(tmp_path):
    with FakeLLMServer(wire="openai") as srv:
        srv.enqueue(Reply(tool_calls=[ToolCall("save_note", {"name": "a:b"}, id="t1")]), Reply(text="ok"))
        builder = OpenheimClient.builder().api_base(srv.base_url).api_key("sk-x").data_dir(tmp_path / "data")
        with builder.tool(save_note).build() as client:
            client.new_session(cwd=tmp_path).prompt("save it")
        messages = srv.requests[-1].body["messages"]
    result = next(m["content"] for m in messages if m.get("role") == "tool")
    text = result if isinstance(result, str) else json.dumps(result)
    assert "OSError" not in text and "[Errno 22]" not in text, text
    assert "could not access a:b: Invalid argument" in text
    assert "refused it" in text
