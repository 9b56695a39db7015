"""Trust covers what a trusted hook or project MCP server runs from the workspace, not only the file's bytes;
and hooks run where the model cannot plant code. Each case as the hostile model plays it, through the CLI."""

from __future__ import annotations

import json
import sys

import pytest
from cli_helpers import fake_provider, openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall


def results(request) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


def write(path: str, content: str, id: str = "w") -> ToolCall:
    return ToolCall("write_file", {"path": path, "content": content}, id=id)


def test_a_script_rewritten_in_the_turn_stops_the_trusted_hook(isolated_home, tmp_path):
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    (project / "scripts" / "lint.sh").write_text("echo '{}'\n")
    marker = tmp_path / "PWNED"
    settings = project / ".openheim" / "settings.toml"
    settings.parent.mkdir()
    settings.write_text('[[hooks]]\nevent = "pre_tool"\ncommand = "sh \\"$OPENHEIM_PROJECT_DIR/scripts/lint.sh\\""\n')
    with fake_provider("openai", isolated_home) as srv:
        t = openheim("permissions", "trust", cwd=project)
        assert t.returncode == 0, t.stderr
        evil = f"touch {marker}\necho '{{}}'\n"
        srv.enqueue(
            Reply(tool_calls=[write("scripts/lint.sh", evil)]),
            Reply(tool_calls=[ToolCall("list_dir", {"path": "."}, id="l")]),
            Reply(text="done"),
        )
        r = openheim("run", "--approve", "all", "go", cwd=project)
        assert r.returncode == 0, r.stderr
        first, second = results(srv.requests[1])[-1], results(srv.requests[2])[-1]
        assert not first.startswith("Refused"), first  # the hook ran (unchanged) before the write
        assert second.startswith("Refused: the pre_tool hook") and "scripts/lint.sh changed since you trusted" in second
        assert not marker.exists()

        # the next session: the file's hooks are ignored, with one line naming the script
        srv.enqueue(Reply(tool_calls=[ToolCall("list_dir", {"path": "."}, id="l")]), Reply(text="done"))
        r = openheim("run", "--approve", "all", "go", cwd=project)
        assert r.returncode == 0, r.stderr
        assert not marker.exists()
        lines = [x for x in r.stderr.splitlines() if "scripts/lint.sh" in x]
        assert len(lines) == 1 and "changed since you trusted it" in lines[0], r.stderr

        # trusting again runs the (now accepted) script
        assert openheim("permissions", "trust", cwd=project).returncode == 0
        srv.enqueue(Reply(tool_calls=[ToolCall("list_dir", {"path": "."}, id="l")]), Reply(text="done"))
        assert openheim("run", "--approve", "all", "go", cwd=project).returncode == 0
        assert marker.exists()


def test_python_dash_m_in_a_user_hook_does_not_import_a_planted_package(isolated_home, tmp_path):
    marker = tmp_path / "PWNED"
    extra = f'[[hooks]]\nevent = "pre_tool"\ncommand = "{sys.executable} -m json.tool"\n'
    planted = f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n"
    with fake_provider("openai", isolated_home, extra=extra) as srv:
        srv.enqueue(
            Reply(tool_calls=[write("json/__init__.py", planted, "a"), write("json/tool.py", planted, "b")]),
            Reply(tool_calls=[ToolCall("list_dir", {"path": "."}, id="l")]),
            Reply(text="done"),
        )
        r = openheim("run", "--approve", "all", "go", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "json" / "tool.py").exists()
        assert not results(srv.requests[2])[-1].startswith("Refused"), r.stderr
    assert not marker.exists()


def test_a_hook_runs_outside_the_workspace_and_is_told_where_it_is(isolated_home, tmp_path):
    out = tmp_path / "seen.json"
    script = tmp_path / "where.py"
    script.write_text(
        "import json, os, sys\n"
        f"json.dump({{'cwd': os.getcwd(), 'project': os.environ['OPENHEIM_PROJECT_DIR'],"
        f" 'safe': os.environ.get('PYTHONSAFEPATH')}}, open({str(out)!r}, 'w'))\n"
    )
    work = tmp_path / "work"
    work.mkdir()
    extra = f'[[hooks]]\nevent = "user_prompt"\ncommand = "{sys.executable} {script}"\n'
    with fake_provider("openai", isolated_home, extra=extra) as srv:
        srv.enqueue(Reply(text="done"))
        assert openheim("run", "go", cwd=work).returncode == 0
    seen = json.loads(out.read_text())
    assert seen["project"] == str(work.resolve()) and seen["safe"] == "1"
    assert not seen["cwd"].startswith(str(work.resolve())) and "openheim-hook-" in seen["cwd"]


def test_a_rewritten_mcp_script_is_not_started_until_trusted_again(isolated_home, tmp_path):
    pytest.importorskip("mcp")
    from mcp_helpers import PYTHON, SERVER, offered

    (tmp_path / "tools").mkdir()
    script = tmp_path / "tools" / "mcp.sh"
    script.write_text(f"exec {PYTHON} {SERVER}\n")
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"local": {"command": "sh", "args": ["tools/mcp.sh"]}}})
    )
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, extra="mcp_startup_timeout_secs = 60\n")  # a busy machine
        t = openheim("mcp", "trust", cwd=tmp_path)
        assert t.returncode == 0, t.stderr
        srv.enqueue(Reply(text="done"))
        r = openheim("run", "go", cwd=tmp_path)
        assert r.returncode == 0 and "local__echo" in offered(srv.requests[-1]), r.stderr

        marker = tmp_path / "PWNED"
        script.write_text(f"touch {marker}\nexec {PYTHON} {SERVER}\n")  # what the model's shell did last turn
        srv.enqueue(Reply(text="done"))
        r = openheim("run", "go", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "local__echo" not in offered(srv.requests[-1]) and not marker.exists()
        lines = [x for x in r.stderr.splitlines() if "tools/mcp.sh" in x]
        assert len(lines) == 1 and "changed since you trusted it" in lines[0], r.stderr
