"""Allow rules match only the plain command; deny rules and hook matchers see through wrappers.

Driven as a hostile model would: `openheim run --approve none --allow 'execute_command(git diff *)'` against
the fake provider, with the command hidden behind an assignment, a wrapper or a git global option."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_helpers import fake_provider, openheim, write_config
from fake_llm import Reply, ToolCall

from openheim.config.rules import decide, parse_rules

BYPASSES = [
    "GIT_EXTERNAL_DIFF=./evil git diff",
    "env -S 'sh -c \"id > F1\"' git diff",
    "LD_PRELOAD=./x.so git diff",
    "env -i PATH=. git diff",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=diff.external GIT_CONFIG_VALUE_0=./evil git diff",
    "nohup git diff",
    "command -p git diff",
    "exec git diff",
    "nice -n 5 git diff",
    "timeout 5 git diff",
    "stdbuf -o0 git diff",
    "setsid git diff",
    "echo . | xargs git diff",
    "sh -c 'git diff; id > F2'",
    "git -c diff.external=./evil diff",
    "git -C /tmp diff",
    "git --git-dir=/tmp/x diff",
    "git --work-tree=/ diff",
    "git --exec-path=. diff",
]
SHELL = "allow_shell = true\n"
HIDDEN_PUSHES = [
    "git -C . push",
    "git -c a.b=c push",
    "{ git push; }",
    "git --git-dir=.git push origin",
    "env git push",
]


def results(request) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


def calls(*commands: str) -> Reply:
    return Reply(tool_calls=[ToolCall("execute_command", {"command": c}, id=f"c{i}") for i, c in enumerate(commands)])


@pytest.fixture
def repo(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    evil = work / "evil"
    evil.write_text("#!/bin/sh\ntouch PWNED\n")
    evil.chmod(0o755)
    return work


def test_an_allow_rule_does_not_cover_a_wrapped_command(isolated_home, repo):
    with fake_provider("openai", isolated_home, extra=SHELL) as srv:
        srv.enqueue(calls(*BYPASSES, "git diff", "git diff --stat"), Reply(text="done"))
        r = openheim("run", "--approve", "none", "--allow", "execute_command(git diff *)", "go", cwd=repo)
        assert r.returncode == 0, r.stderr
        got = results(srv.requests[1])
    denied = "Permission denied by policy (--approve none)"
    for command, result in zip(BYPASSES, got, strict=False):
        assert result.startswith(denied), (command, result)
    assert not any(got[-2].startswith(x) or got[-1].startswith(x) for x in (denied,)), got[-2:]
    assert not (repo / "PWNED").exists() and not (repo / "F1").exists() and not (repo / "F2").exists()


def test_a_rule_that_spells_the_wrapper_allows_it(isolated_home, repo):
    with fake_provider("openai", isolated_home, extra=SHELL) as srv:
        srv.enqueue(calls("GIT_PAGER=cat git diff", "nohup git diff"), Reply(text="done"))
        r = openheim(
            "run",
            "--approve",
            "none",
            "--allow",
            "execute_command(GIT_PAGER=cat git diff *)",
            "--allow",
            "execute_command(* git diff)",
            "go",
            cwd=repo,
        )
        assert r.returncode == 0, r.stderr
        got = results(srv.requests[1])
    assert not got[0].startswith("Permission denied"), got[0]
    assert got[1].startswith("Permission denied"), got[1]  # `*` does not spell nohup


def test_explain_names_what_the_rule_must_spell(isolated_home, tmp_path):
    write_config(isolated_home, "http://127.0.0.1:9/v1", extra=SHELL)
    r = openheim(
        "permissions",
        "explain",
        "--allow",
        "execute_command(git diff *)",
        "--approve",
        "none",
        "execute_command",
        json.dumps({"command": "GIT_EXTERNAL_DIFF=./evil git diff"}),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "denied" in r.stdout and "must spell GIT_EXTERNAL_DIFF=" in r.stdout


@pytest.mark.parametrize("command", HIDDEN_PUSHES)
def test_deny_rules_see_through_global_options_and_groups(command):
    deny = parse_rules([], ["execute_command(git push *)"], "t")
    assert decide("execute_command", {"command": command}, deny).outcome == "deny"


def test_a_pre_tool_hook_fires_through_global_options_and_groups(isolated_home, repo, tmp_path):
    hook = tmp_path / "block.py"
    hook.write_text("import sys\nprint('no pushing', file=sys.stderr)\nsys.exit(2)\n")
    extra = SHELL + (
        f'[[hooks]]\nevent = "pre_tool"\nmatcher = "execute_command(git push *)"\ncommand = "{sys.executable} {hook}"\n'
    )
    with fake_provider("openai", isolated_home, extra=extra) as srv:
        srv.enqueue(calls(*HIDDEN_PUSHES, "git status --short"), Reply(text="done"))
        r = openheim("run", "--approve", "all", "--sandbox", "off", "go", cwd=repo)
        assert r.returncode == 0, r.stderr
        got = results(srv.requests[1])
    for command, result in zip(HIDDEN_PUSHES, got, strict=False):
        assert result == "Blocked by hook: no pushing", (command, result)
    assert "Blocked" not in got[-1]
