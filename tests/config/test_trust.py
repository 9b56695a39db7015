"""A project's own configuration is code from strangers: `.openheim/settings.toml` allow rules apply only once
the user trusted the file (`openheim permissions trust`, by content hash), and a tool writing `.openheim/**`
or `.mcp.json` needs a person (or a user allow rule naming the path) whatever the rules, mode or --approve."""

from __future__ import annotations

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim.config.protected import is_protected


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url, extra="allow_shell = false\n")
        yield server


def tool_results(srv, request: int = -1) -> list[str]:
    return [m["content"] for m in srv.requests[request].body["messages"] if m["role"] == "tool"]


def write_call(srv, path: str, content: str = "x", tool: str = "write_file") -> None:
    args = (
        {"path": path, "content": content}
        if tool == "write_file"
        else {"path": path, "old_string": "old", "new_string": content}
    )
    srv.enqueue(Reply(tool_calls=[ToolCall(tool, args, id="w")]), Reply(text="done"))


def settings(project, text: str):
    path = project / ".openheim" / "settings.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def untrusted_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "openheim permissions trust" in line]


def test_an_untrusted_project_allow_approves_nothing_until_trusted_and_again_after_a_change(srv, tmp_path):
    path = settings(tmp_path, '[permissions]\nallow = ["*"]\n')
    write_call(srv, "a.txt")
    r = openheim("run", "--approve", "reads", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--approve reads" in tool_results(srv)[0] and not (tmp_path / "a.txt").exists()
    [line] = untrusted_lines(r.stderr)
    assert f"{path} is not trusted, so its allow rules are ignored" in line

    t = openheim("permissions", "trust", cwd=tmp_path)
    assert t.returncode == 0 and str(path) in t.stdout, t.stderr
    write_call(srv, "a.txt")
    r = openheim("run", "--approve", "reads", "go", cwd=tmp_path)
    assert r.returncode == 0 and untrusted_lines(r.stderr) == [], r.stderr
    assert (tmp_path / "a.txt").read_text() == "x"

    path.write_text('[permissions]\nallow = ["*"]\n# changed\n')
    write_call(srv, "b.txt")
    r = openheim("run", "--approve", "reads", "go", cwd=tmp_path)
    [line] = untrusted_lines(r.stderr)
    assert "changed since you trusted it" in line and not (tmp_path / "b.txt").exists()


def test_deny_rules_of_an_untrusted_file_still_apply(srv, tmp_path):
    settings(tmp_path, '[permissions]\ndeny = ["write_file(gen/**)"]\n')
    write_call(srv, "gen/a.txt")
    r = openheim("run", "go", cwd=tmp_path)
    assert r.returncode == 0 and untrusted_lines(r.stderr) == [], r.stderr
    assert tool_results(srv)[0].startswith("Permission denied by rule") and not (tmp_path / "gen").exists()


@pytest.mark.parametrize("target", [".openheim/settings.toml", ".mcp.json", "sub/.openheim/agents/x.md"])
def test_approve_all_and_rules_allowing_every_write_never_write_the_projects_configuration(srv, tmp_path, target):
    write_call(srv, target, '[permissions]\nallow = ["*"]\n')
    r = openheim("run", "--approve", "all", "--allow", "write_file", "--allow", "write_file(**)", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    [result] = tool_results(srv)
    assert result.startswith(f"Permission denied: {target} is the project's openheim configuration")
    assert not (tmp_path / target).exists()


def test_edit_file_through_a_symlink_is_judged_by_its_target(srv, tmp_path):
    settings(tmp_path, "# old\n")
    (tmp_path / "innocent.toml").symlink_to(tmp_path / ".openheim" / "settings.toml")
    write_call(srv, "innocent.toml", "new", tool="edit_file")
    r = openheim("run", "--approve", "all", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "project's openheim configuration" in tool_results(srv)[0]
    assert (tmp_path / ".openheim" / "settings.toml").read_text() == "# old\n"


def test_a_user_allow_rule_naming_the_path_lets_the_write_through(srv, tmp_path):
    write_call(srv, ".openheim/settings.toml", "[permissions]\n")
    r = openheim("run", "--approve", "none", "--allow", "write_file(.openheim/settings.toml)", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / ".openheim" / "settings.toml").read_text() == "[permissions]\n"


def test_the_shared_predicate(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / ".openheim")
    for path, expected in (
        (".openheim/settings.toml", True),
        ("a/.openheim", True),
        (".mcp.json", True),
        ("x/.mcp.json", True),
        ("link/x", True),
        ("src/mcp.json", False),
        ("README.md", False),
        ("../outside/.openheim", False),
    ):
        assert is_protected(path, str(tmp_path)) is expected, path
