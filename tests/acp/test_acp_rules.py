"""ACP "allow always" is saved as exact allow rules in the project's .openheim/settings.toml, keeping what
the file held, and a later `openheim run` honours them."""
from __future__ import annotations

import tomllib

from cli_helpers import openheim
from fake_llm import Reply, ToolCall


def test_allow_always_is_saved_for_the_project_and_a_later_run_honours_it(wire, srv, project):
    settings = project / ".openheim" / "settings.toml"
    settings.parent.mkdir()
    settings.write_text("# team notes stay\n[editor]\ntheme = \"dark\"\n")
    srv.enqueue(Reply(tool_calls=[ToolCall("write_file", {"path": "kept.txt", "content": "one"})]), Reply(text="ok"),
                Reply(tool_calls=[ToolCall("execute_command", {"command": "echo a && echo b > out.txt"})]),
                Reply(text="ok"))
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
    assert names == ["Allow Always (saves write_file(kept.txt) for this project)",
                     "Allow Always (saves execute_command(echo a), execute_command(echo b > out.txt) for this project)"]
    text = settings.read_text()
    assert text.startswith("# team notes stay\n[editor]\ntheme = \"dark\"\n")
    assert tomllib.loads(text)["permissions"]["allow"] == [
        "write_file(kept.txt)", "execute_command(echo a)", "execute_command(echo b > out.txt)"]

    srv.enqueue(Reply(tool_calls=[ToolCall("write_file", {"path": "kept.txt", "content": "two"}, id="w1"),
                                  ToolCall("write_file", {"path": "other.txt", "content": "x"}, id="w2"),
                                  ToolCall("execute_command", {"command": "echo b > out.txt; echo a"}, id="e1"),
                                  ToolCall("execute_command", {"command": "echo c"}, id="e2")]),
                Reply(text="done"))
    r = openheim("run", "--approve", "reads", "again", cwd=project)
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "tool"]
    assert (project / "kept.txt").read_text() == "two"
    assert "--approve reads" in results[1] and not (project / "other.txt").exists()
    assert "--approve reads" not in results[2] and (project / "out.txt").read_text() == "b\n"
    assert "--approve reads" in results[3]
