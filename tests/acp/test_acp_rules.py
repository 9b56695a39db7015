"""ACP "allow always" is saved as exact allow rules in the project's .openheim/settings.toml, keeping what
the file held, and a later `openheim run` honours them."""

from __future__ import annotations

import tomllib

from cli_helpers import openheim
from fake_llm import Reply, ToolCall


def test_allow_always_is_saved_for_the_project_and_a_later_run_honours_it(wire, srv, project):
    settings = project / ".openheim" / "settings.toml"
    settings.parent.mkdir()
    settings.write_text('# team notes stay\n[editor]\ntheme = "dark"\n')
    srv.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": "kept.txt", "content": "one"})]),
        Reply(text="ok"),
        Reply(tool_calls=[ToolCall("execute_command", {"command": "echo a && echo b > out.txt"})]),
        Reply(text="ok"),
    )
    asked: list[dict] = []

    def always(frame: dict) -> dict:
        asked.append(frame["params"])
        return {"outcome": {"outcome": "selected", "optionId": "allow_always"}}

    wire.initialize()
    sid = wire.new_session(project)
    for text in ("write it", "run it"):
        response, _ = wire.prompt(sid, text, on_request=always)
        assert response["result"]["stopReason"] == "end_turn"
    names = [{o["optionId"]: o["name"] for o in p["options"]}["allow_always"] for p in asked]
    assert names == [
        "Allow Always (saves write_file(kept.txt) for this project)",
        "Allow Always (saves execute_command(echo a), execute_command(echo b > out.txt) for this project)",
    ]
    text = settings.read_text()
    assert text.startswith('# team notes stay\n[editor]\ntheme = "dark"\n')
    assert tomllib.loads(text)["permissions"]["allow"] == [
        "write_file(kept.txt)",
        "execute_command(echo a)",
        "execute_command(echo b > out.txt)",
    ]

    srv.enqueue(
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": "kept.txt", "content": "two"}, id="w1"),
                ToolCall("write_file", {"path": "other.txt", "content": "x"}, id="w2"),
                ToolCall("execute_command", {"command": "echo b > out.txt; echo a"}, id="e1"),
                ToolCall("execute_command", {"command": "echo c"}, id="e2"),
            ]
        ),
        Reply(text="done"),
    )
    r = openheim("run", "--approve", "reads", "again", cwd=project)
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "tool"]
    assert (project / "kept.txt").read_text() == "two"
    assert "--approve reads" in results[1] and not (project / "other.txt").exists()
    assert "--approve reads" not in results[2] and (project / "out.txt").read_text() == "b\n"
    assert "--approve reads" in results[3]


def test_writing_the_projects_configuration_asks_the_person_every_time(wire, srv, project):
    """An editor's person may approve a write to .mcp.json; "allow always" for write_file does not cover the
    next one (no remembered answer, rule or mode approves the project's own configuration)."""
    srv.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a"})]),
        Reply(text="ok"),
        Reply(tool_calls=[ToolCall("write_file", {"path": ".mcp.json", "content": "{}"})]),
        Reply(text="ok"),
        Reply(tool_calls=[ToolCall("write_file", {"path": ".mcp.json", "content": '{"x": 1}'})]),
        Reply(text="ok"),
    )
    answers = iter(["allow_always", "allow_once", "reject_once"])
    asked: list[str] = []

    def answer(frame: dict) -> dict:
        asked.append(frame["params"]["toolCall"]["toolCallId"])
        return {"outcome": {"outcome": "selected", "optionId": next(answers)}}

    wire.initialize()
    sid = wire.new_session(project)
    for text in ("write a", "write mcp", "write mcp again"):
        response, _ = wire.prompt(sid, text, on_request=answer)
        assert response["result"]["stopReason"] == "end_turn"
    assert len(asked) == 3  # the person was asked each time, despite "allow always" for write_file
    assert (project / ".mcp.json").read_text() == "{}"  # approved once, then refused
