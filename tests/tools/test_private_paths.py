"""openheim's data dir is out of reach of every file tool, whatever the session's root and whatever its name."""

from __future__ import annotations

from cli_helpers import write_config
from fake_client import ScriptedLlm, text_reply, tool_reply

from openheim.client import OpenheimClient


def test_file_tools_never_reach_a_data_dir_inside_the_work_dir(isolated_home, tmp_path):
    work = tmp_path / "work"
    data = work / "data"  # not hidden: search would walk into it
    data.mkdir(parents=True)
    (data / "notes.txt").write_text("needle from the data dir\n")
    (work / "src.txt").write_text("needle from the project\n")
    write_config(isolated_home, "http://127.0.0.1:9/v1")
    llm = ScriptedLlm(
        [
            tool_reply(
                ("search", {"pattern": "needle"}),
                ("read_file", {"path": "data/notes.txt"}),
                ("write_file", {"path": "data/config.toml", "content": "x"}),
                ("list_dir", {"path": "data"}),
            ),
            text_reply("done"),
        ]
    )
    client = OpenheimClient.builder().llm_factory(lambda cfg: llm).data_dir(data).work_dir(work).build()
    client.new_session(work).prompt("look around")
    results = [block for m in llm.sent[-1] if m.role == "tool" for block in m.content]
    text = " ".join(str(getattr(b, "content", b)) for b in results)
    assert "needle from the project" in text and "needle from the data dir" not in text
    assert text.count("inside openheim's data directory") == 3
    assert not (data / "config.toml").exists()


def test_a_session_rooted_inside_the_data_dir_chose_to_work_there(isolated_home):
    inside = isolated_home / "skills-work"
    inside.mkdir()
    (inside / "draft.md").write_text("a draft")
    write_config(isolated_home, "http://127.0.0.1:9/v1")
    llm = ScriptedLlm(
        [tool_reply(("read_file", {"path": "draft.md"}), ("read_file", {"path": "../config.toml"})), text_reply("done")]
    )
    client = OpenheimClient.builder().llm_factory(lambda cfg: llm).work_dir(inside).build()
    client.new_session(inside).prompt("read it")
    text = " ".join(str(getattr(b, "content", b)) for m in llm.sent[-1] if m.role == "tool" for b in m.content)
    assert "a draft" in text and "outside the work directory" in text
