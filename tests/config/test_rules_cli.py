"""Permission rules end to end: `openheim run --allow/--deny`, [permissions] in config.toml, a project's
.openheim/settings.toml, shell compound commands, and `openheim permissions explain`."""

from __future__ import annotations

import json

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

DENIED_BY_RULE = "Permission denied by rule"
DENIED_NONE = "Permission denied by policy (--approve none)"
DENIED_READS = "Permission denied by policy (--approve reads)"


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


def config(home, srv, permissions: str = "", shell: bool = True, work_dir=None):
    extra = ("allow_shell = true\n" if shell else "") + (f'work_dir = "{work_dir}"\n' if work_dir else "")
    extra += f"[permissions]\n{permissions}\n" if permissions else ""
    return write_config(home, srv.base_url, extra=extra)


def tool_results(srv, request: int = 1) -> list[str]:
    return [m["content"] for m in srv.requests[request].body["messages"] if m["role"] == "tool"]


def calls(srv, *tool_calls: tuple[str, dict]) -> None:
    srv.enqueue(
        Reply(tool_calls=[ToolCall(name, args, id=f"c{i}") for i, (name, args) in enumerate(tool_calls)]),
        Reply(text="done"),
    )


def test_allow_rules_run_what_they_match_and_the_rest_falls_through_to_approve(srv, isolated_home, tmp_path):
    config(isolated_home, srv)
    (tmp_path / "src").mkdir()
    calls(
        srv,
        ("write_file", {"path": "src/deep/a.txt", "content": "a"}),
        ("write_file", {"path": "b.txt", "content": "b"}),
        ("read_file", {"path": "src/deep/a.txt"}),
    )
    r = openheim(
        "run", "--approve", "none", "--allow", "write_file(src/**)", "--allow", "read_file", "go", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    results = tool_results(srv)
    assert (tmp_path / "src/deep/a.txt").read_text() == "a"
    assert DENIED_NONE in results[1] and not (tmp_path / "b.txt").exists()
    assert results[2] == "a" or "a" in results[2]


def test_deny_wins_over_allow_and_names_the_rule(srv, isolated_home, tmp_path):
    config(isolated_home, srv, 'allow = ["write_file"]')
    calls(
        srv, ("write_file", {"path": "secret.env", "content": "x"}), ("write_file", {"path": "ok.txt", "content": "y"})
    )
    r = openheim("run", "--approve", "none", "--deny", "write_file(*.env)", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    results = tool_results(srv)
    assert results[0].startswith(DENIED_BY_RULE) and "write_file(*.env)" in results[0] and "secret.env" in results[0]
    assert not (tmp_path / "secret.env").exists()
    assert (tmp_path / "ok.txt").read_text() == "y"


def test_a_deny_rule_refuses_a_read_only_tool_that_approve_all_would_run(srv, isolated_home, tmp_path):
    config(isolated_home, srv, 'deny = ["read_file(private/**)"]')
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "key").write_text("TOPSECRET")
    (tmp_path / "open.txt").write_text("public")
    calls(srv, ("read_file", {"path": "./private/../private/key"}), ("read_file", {"path": "open.txt"}))
    r = openheim("run", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    results = tool_results(srv)
    assert results[0].startswith(DENIED_BY_RULE) and "TOPSECRET" not in json.dumps(srv.requests[1].body)
    assert "public" in results[1]


SHELL_CASES = [
    ("echo one; touch pwned1", False),
    ("echo one && touch pwned2", False),
    ("echo one || touch pwned3", False),
    ("echo one | touch pwned4", False),
    ("echo $(touch pwned5)", False),
    ("echo `touch pwned6`", False),
    ("echo one & touch pwned7", False),
    ("echo one\ntouch pwned8", False),
    ('echo "one; touch pwned9"', True),  # a quoted ; is an argument, not a separator
    ("echo 'one && touch pwned10'", True),
    ('echo "unbalanced', False),  # never allowed by a rule: falls through to --approve none
]


def test_shell_rules_cover_a_compound_command_only_when_they_cover_every_part(srv, isolated_home, tmp_path):
    config(isolated_home, srv)
    calls(srv, *[("execute_command", {"command": c}) for c, _ in SHELL_CASES])
    r = openheim("run", "--approve", "none", "--allow", "execute_command(echo *)", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    results = tool_results(srv)
    for (command, allowed), result in zip(SHELL_CASES, results):
        assert (DENIED_NONE not in result) == allowed, (command, result)
    assert not list(tmp_path.glob("pwned*"))
    assert "one; touch pwned9" in results[8]


def test_a_deny_matches_any_part_of_a_compound_command(srv, isolated_home, tmp_path):
    config(isolated_home, srv, 'allow = ["execute_command"]\ndeny = ["execute_command(rm *)"]')
    (tmp_path / "x").mkdir()
    calls(
        srv,
        ("execute_command", {"command": "echo hi; rm -rf x"}),
        ("execute_command", {"command": "echo $(rm -r x)"}),
        ("execute_command", {"command": "echo fine"}),
    )
    r = openheim("run", "--approve", "none", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    results = tool_results(srv)
    assert results[0].startswith(DENIED_BY_RULE) and "'rm -rf x'" in results[0]
    assert results[1].startswith(DENIED_BY_RULE)
    assert (tmp_path / "x").is_dir()
    assert "fine" in results[2]


def test_an_mcp_style_rule_names_the_registry_tool(tmp_path):
    from openheim.config.rules import decide, parse_rules

    rules = parse_rules(["mcp:time__*"], ["mcp:time__set"])
    assert decide("time__now", {}, rules).outcome == "allow"
    assert decide("time__set", {}, rules).outcome == "deny"
    assert decide("other__now", {}, rules).outcome == "fall_through"


def project_settings(project, text: str) -> None:
    (project / ".openheim").mkdir(parents=True, exist_ok=True)
    (project / ".openheim" / "settings.toml").write_text(text)


def test_a_project_deny_narrows_what_the_config_allows(srv, isolated_home, tmp_path):
    config(isolated_home, srv, 'allow = ["write_file"]')
    project_settings(tmp_path, '[permissions]\ndeny = ["write_file(generated/**)"]\n')
    (tmp_path / "generated").mkdir()
    calls(
        srv, ("write_file", {"path": "generated/x.c", "content": "x"}), ("write_file", {"path": "y.c", "content": "y"})
    )
    r = openheim("run", "--approve", "none", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    results = tool_results(srv)
    assert results[0].startswith(DENIED_BY_RULE) and ".openheim/settings.toml" in results[0]
    assert not (tmp_path / "generated/x.c").exists() and (tmp_path / "y.c").exists()


def test_a_project_allow_cannot_widen_a_config_deny_nor_approve_none(srv, isolated_home, tmp_path):
    config(isolated_home, srv, 'deny = ["execute_command(touch *)"]')
    project_settings(tmp_path, '[permissions]\nallow = ["execute_command(touch *)", "write_file"]\n')
    assert openheim("permissions", "trust", cwd=tmp_path).returncode == 0  # even trusted, it cannot widen
    calls(srv, ("execute_command", {"command": "touch t1"}), ("write_file", {"path": "w.txt", "content": "w"}))
    r = openheim("run", "--approve", "none", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    results = tool_results(srv)
    assert results[0].startswith(DENIED_BY_RULE) and not (tmp_path / "t1").exists()
    assert DENIED_NONE in results[1] and not (tmp_path / "w.txt").exists()


def test_a_project_allow_answers_what_approve_reads_would_refuse(srv, isolated_home, tmp_path):
    config(isolated_home, srv, work_dir=tmp_path)
    project_settings(tmp_path, '[permissions]\nallow = ["write_file(notes/*)"]\n')
    assert openheim("permissions", "trust", cwd=tmp_path).returncode == 0  # a project's allows need trust
    (tmp_path / "notes").mkdir()
    sub = tmp_path / "notes"
    calls(srv, ("write_file", {"path": "n.md", "content": "n"}), ("write_file", {"path": "../o.md", "content": "o"}))
    r = openheim("run", "--approve", "reads", "go", cwd=sub)  # the sandbox root's file; paths relative to the root
    assert r.returncode == 0, r.stderr
    results = tool_results(srv)
    assert (sub / "n.md").read_text() == "n"
    assert DENIED_READS in results[1] and not (tmp_path / "o.md").exists()


def test_malformed_rules_are_one_line_errors_naming_the_rule_and_the_file(srv, isolated_home, tmp_path):
    path = config(isolated_home, srv, 'allow = ["write_file(src/**"]')
    r = openheim("run", "go", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "write_file(src/**" in r.stderr and str(path) in r.stderr

    config(isolated_home, srv)
    r = openheim("run", "--deny", "bad name", "go", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "'bad name'" in r.stderr

    project_settings(tmp_path, '[permissions]\ndeny = ["(x)"]\n')
    r = openheim("run", "go", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "'(x)'" in r.stderr and ".openheim/settings.toml" in r.stderr
    assert not srv.requests  # nothing reached the model


def explain(*args: str, cwd=None):
    return openheim("permissions", "explain", *args, cwd=cwd)


def test_explain_names_the_deciding_rule_and_the_failing_part(srv, isolated_home, tmp_path):
    config(isolated_home, srv, 'allow = ["execute_command(git diff *)"]\ndeny = ["execute_command(rm *)"]')
    r = explain("execute_command", '{"command": "git diff --stat"}', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "decision: allowed by rule" in r.stdout and "rule: execute_command(git diff *) (from " in r.stdout

    r = explain("execute_command", '{"command": "git diff && curl evil"}', "--approve", "reads", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "decision: falls through to --approve reads: denied" in r.stdout
    assert "why: part 'curl evil' of the command matches no allow rule" in r.stdout

    r = explain("execute_command", '{"command": "git diff; rm -rf /"}', cwd=tmp_path)
    assert "decision: denied by rule" in r.stdout and "'rm -rf /'" in r.stdout

    r = explain("write_file", '{"path": "a.txt"}', "--allow", "write_file(*.txt)", cwd=tmp_path)
    assert "decision: allowed by rule" in r.stdout and "(from command line)" in r.stdout

    project_settings(tmp_path, '[permissions]\nallow = ["write_file"]\n')
    assert openheim("permissions", "trust", cwd=tmp_path).returncode == 0
    r = explain("write_file", '{"path": "a.txt"}', "--approve", "none", cwd=tmp_path)
    assert "project allow rules do not apply under --approve none" in r.stdout


def test_explain_errors_are_one_line_with_exit_2(srv, isolated_home, tmp_path):
    config(isolated_home, srv)
    for args, text in (
        (("read_file", "{not json"), "ARGS_JSON is not valid JSON"),
        (("read_file", "[1]"), "must be a JSON object"),
        (("no_such_tool", "{}"), "unknown tool 'no_such_tool'"),
        (("read_file", "{}", "--allow", "read_file("), "'read_file('"),
    ):
        r = explain(*args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.strip().count("\n") == 0 and text in r.stderr, r.stderr


def test_a_malformed_flag_rule_is_a_json_failure_object_too(srv, isolated_home, tmp_path):
    config(isolated_home, srv)
    r = openheim("run", "-o", "json", "--allow", "write_file(", "go", cwd=tmp_path)
    assert r.returncode == 2
    failure = json.loads(r.stdout)
    assert failure["error"]["kind"] == "config_error" and "'write_file('" in failure["error"]["message"]
    assert failure["exit_code"] == 2 and not srv.requests
