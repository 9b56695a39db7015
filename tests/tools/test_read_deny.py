"""A path deny for reading (`--deny 'read_file(secret.txt)'`, or in config/project settings) holds for every
tool that returns file content: search never opens the file. list_dir still shows its name (docs/pipelines.md)."""

from __future__ import annotations

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall


@pytest.mark.parametrize("engine", ["rg", "python"])
def test_search_leaves_out_files_a_read_deny_names(isolated_home, tmp_path, engine, monkeypatch):
    if engine == "python":
        monkeypatch.setenv("PATH", "/nonexistent")  # no rg on PATH: the Python engine searches
    (tmp_path / "secret.txt").write_text("TOKEN=SUPERSECRET-42\n")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "prod.env").write_text("KEY=SUPERSECRET-43\n")
    (tmp_path / "notes.txt").write_text("the SUPERSECRET word is public here\n")
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        srv.enqueue(
            Reply(
                tool_calls=[
                    ToolCall("search", {"pattern": "SUPERSECRET"}, id="s1"),
                    ToolCall("search", {"pattern": "SUPERSECRET", "path": "secret.txt"}, id="s2"),
                    ToolCall("list_dir", {}, id="l"),
                ]
            ),
            Reply(text="done"),
        )
        r = openheim(
            "run",
            "--deny",
            "read_file(secret.txt)",
            "--deny",
            "read_file(keys/*.env)",
            "go",
            cwd=tmp_path,
            env={"PATH": "/nonexistent"} if engine == "python" else None,
        )
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in srv.requests[1].body["messages"] if m["role"] == "tool"]
    assert results[0] == "notes.txt:1: the SUPERSECRET word is public here"
    assert "SUPERSECRET-4" not in results[1]
    assert "secret.txt" in results[2]  # names are listed; their content is what a read deny protects
