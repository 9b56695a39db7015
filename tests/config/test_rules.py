"""The pure permission-rule functions: parsing, shell splitting, pattern matching, deciding, suggesting."""

from __future__ import annotations

import pytest

from openheim.config.rules import (
    RuleError,
    RuleSet,
    decide,
    main_argument,
    parse_rule,
    parse_rules,
    split_command,
    suggested_rules,
)
from openheim.core.permission import (
    AllowAll,
    Decision,
    PermissionRequest,
    PolicyGate,
    RulesGate,
)
from openheim.core.tools import ToolCapabilities


def test_parse_rule_forms():
    assert parse_rule("read_file").pattern is None
    rule = parse_rule("execute_command(git diff *)", "cfg")
    assert (rule.tool, rule.pattern, rule.source) == ("execute_command", "git diff *", "cfg")
    assert parse_rule("mcp:time__now").tool == "time__now"
    assert parse_rule("execute_command(echo (a))").pattern == "echo (a)"


@pytest.mark.parametrize("text", ["", "write_file(src", "write_file()", "(x)", "bad name", "a(b)c", 3])
def test_malformed_rules_are_refused_naming_them(text):
    with pytest.raises(RuleError) as e:
        parse_rule(text)
    assert str(text) in str(e.value) or repr(text) in str(e.value)


@pytest.mark.parametrize(
    "line,parts",
    [
        ("git diff", ["git diff"]),
        ("git diff; rm -rf x", ["git diff", "rm -rf x"]),
        ("a && b || c | d & e", ["a", "b", "c", "d", "e"]),
        ("a\nb", ["a", "b"]),
        ("echo $(rm x)", ["echo", "rm x"]),
        ("echo `rm x`", ["echo", "rm x"]),
        ('echo "a $(rm) b"', ["echo a", "rm", "b"]),
        ("(cd x; rm y)", ["cd x", "rm y"]),
        ('git commit -m "a; b && c"', ["git commit -m a; b && c"]),
        ("echo 'a | $(b)'", ["echo a | $(b)"]),
        ("echo a\\; rm", ["echo a; rm"]),
        ("rm\t-rf  x", ["rm -rf x"]),
        ("\\rm x; r''m y; \"rm\" z", ["rm x", "rm y", "rm z"]),
        ("env -i FOO=1 command nohup rm x", ["rm x"]),
        ("FOO=1", ["FOO=1"]),
        ("git diff # a comment; rm x", ["git diff"]),
        ("git diff #'\ntouch PWNED\n#'", ["git diff", "touch PWNED"]),
        ("echo a#b", ["echo a#b"]),
        ("make 2>&1", ["make 2>&1"]),
        ("a;;b;", ["a", "b"]),
    ],
)
def test_split_command(line, parts):
    assert [p.text for p in split_command(line)] == parts


@pytest.mark.parametrize(
    "line", ['echo "x', "echo 'x", "echo $(x", "echo `x", "echo x\\", "git diff 'a\nb'", 'git diff "a\n; rm x"']
)
def test_unbalanced_commands_cannot_be_parsed(line):
    assert split_command(line) is None


@pytest.mark.parametrize(
    "command",
    [
        "rm\t-rf x",
        "\\rm x",
        "r''m x",
        '"rm" x',
        "command rm x",
        "/bin/rm x",
        "env rm x",
        "FOO=1 rm x",
        "sh -c 'rm x'",
        'bash -c "cd /; rm x"',
        "eval rm x",
        "echo x | xargs rm",
        "echo x | xargs -0 rm -f",
    ],
)
def test_a_deny_rule_sees_through_quoting_prefixes_and_wrappers(command):
    deny = parse_rules([], ["execute_command(rm *)"], "t")
    assert decide("execute_command", {"command": command}, deny).outcome == "deny"


def test_a_comment_cannot_hide_a_second_command_from_an_allow_rule():
    rules = parse_rules(["execute_command(git diff *)"], [], "t")
    verdict = decide("execute_command", {"command": "git diff #'\ntouch PWNED\n#'"}, rules)
    assert verdict.outcome == "fall_through" and "touch PWNED" in verdict.reason
    assert decide("execute_command", {"command": "git diff\t--stat # why"}, rules).outcome == "allow"


def test_redirections_are_noticed():
    assert [p.redirects for p in split_command("ls > out; ls 2>&1; echo '>'")] == [True, True, False]


def allowed(rules: list[str], tool: str, args: dict, deny: list[str] = (), **where) -> str:
    return decide(tool, args, parse_rules(rules, deny, "t"), **where).outcome


@pytest.mark.parametrize(
    "pattern,path,ok",
    [
        ("src/**", "src/a/b/c.py", True),
        ("src/**", "src", False),
        ("src/*", "src/a.py", True),
        ("src/*", "src/a/b.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "x/y/a.py", True),
        ("*.env", "a/.env", False),
        ("src/\\*.py", "src/x.py", False),
        ("src/\\*.py", "src/*.py", True),
    ],
)
def test_path_patterns(pattern, path, ok):
    assert (allowed([f"write_file({pattern})"], "write_file", {"path": path}, root="/r", cwd="/r") == "allow") == ok


def test_paths_are_normalised_relative_to_the_root():
    assert main_argument("write_file", {"path": "./a/../b.txt"}, "/r", "/r/sub") == "sub/b.txt"
    assert main_argument("write_file", {"path": "../../etc/passwd"}, "/r", "/r/sub") is None
    assert main_argument("list_dir", {}, "/r", "/r") == "."
    assert main_argument("web_fetch", {"url": " https://x.org/a "}) == "https://x.org/a"
    assert main_argument("custom", {"b": 1, "a": "x"}) == '{"a":"x","b":1}'
    assert allowed(["write_file(*)"], "write_file", {"path": "../x"}, root="/r", cwd="/r") == "fall_through"


def test_command_patterns():
    rules = ["execute_command(git diff *)", "execute_command(git status)"]
    assert allowed(rules, "execute_command", {"command": "git diff"}) == "allow"
    assert allowed(rules, "execute_command", {"command": "git diff src/a b"}) == "allow"
    assert allowed(rules, "execute_command", {"command": "git diff && git status"}) == "allow"
    assert allowed(rules, "execute_command", {"command": "git status --short"}) == "fall_through"
    assert allowed(rules, "execute_command", {"command": "git diff > /etc/x"}) == "fall_through"
    assert allowed(["execute_command(make > log)"], "execute_command", {"command": "make > log"}) == "allow"
    assert allowed(["execute_command"], "execute_command", {"command": 'echo "x'}) == "fall_through"


def test_url_patterns():
    rules = ["web_fetch(https://docs.python.org/*)"]
    assert allowed(rules, "web_fetch", {"url": "https://docs.python.org/3/library/os.html"}) == "allow"
    assert allowed(rules, "web_fetch", {"url": "https://docs.python.org.evil.com/"}) == "fall_through"


def test_deny_wins_and_project_allows_need_the_users_silence():
    user = parse_rules(["write_file"], ["write_file(*.env)"], "config")
    project = parse_rules(["execute_command(make)"], ["write_file(gen/**)"], "project")
    assert decide("write_file", {"path": "a.env"}, user, project).outcome == "deny"
    verdict = decide("write_file", {"path": "gen/x"}, user, project, "/r", "/r")
    assert verdict.outcome == "deny" and verdict.rule.source == "project"
    assert decide("execute_command", {"command": "make"}, user, project).outcome == "project_allow"
    assert (
        decide("execute_command", {"command": "make"}, parse_rules([], ["execute_command"]), project).outcome == "deny"
    )
    mixed = decide("execute_command", {"command": "make && ls"}, parse_rules(["execute_command(ls)"], []), project)
    assert mixed.outcome == "project_allow"


def test_the_reason_names_the_failing_part():
    verdict = decide("execute_command", {"command": "git diff | sh"}, parse_rules(["execute_command(git diff *)"], []))
    assert verdict.outcome == "fall_through" and "part 'sh'" in verdict.reason


def test_suggested_rules_cover_exactly_the_call():
    assert suggested_rules("write_file", {"path": "a/b*.txt"}, "/r", "/r") == ["write_file(a/b\\*.txt)"]
    assert suggested_rules("execute_command", {"command": "ls *.py && ls"}) == [
        "execute_command(ls \\*.py)",
        "execute_command(ls)",
    ]
    assert suggested_rules("execute_command", {"command": "echo 'x"}) == []
    assert suggested_rules("write_file", {"path": "../x"}, "/r", "/r") == []
    assert suggested_rules("srv__tool", {"a": 1}) == ["mcp:srv__tool"]
    rules = parse_rules(suggested_rules("execute_command", {"command": "ls *.py"}), [])
    assert decide("execute_command", {"command": "ls a.py"}, rules).outcome == "fall_through"


def caps(name: str) -> ToolCapabilities:
    return ToolCapabilities(read_only=name == "read_file")


def request(tool: str, args: str) -> PermissionRequest:
    return PermissionRequest("c1", tool, args)


def test_rules_gate_composes_with_the_fallback_gate():
    user = parse_rules(["write_file(src/**)"], ["read_file(secret)"], "config")
    project = parse_rules(["write_file(docs/**)"], [], "project")
    none = PolicyGate("none", caps)
    gate = RulesGate(none, user, project, "/r", "/r", caps, none.project_allows_apply)
    assert gate.gates_read_only
    assert gate.request(request("write_file", '{"path": "src/a"}')) == Decision.ALLOW_ONCE
    assert gate.request(request("write_file", '{"path": "docs/a"}')) == Decision.REJECT_ONCE  # not under none
    assert gate.request(request("read_file", '{"path": "secret"}')) == Decision.REJECT_ONCE
    assert "read_file(secret)" in gate.denial_message(request("read_file", '{"path": "secret"}'))
    assert "--approve none" in gate.denial_message(request("write_file", '{"path": "x"}'))

    reads = PolicyGate("reads", caps)
    gate = RulesGate(reads, user, project, "/r", "/r", caps, reads.project_allows_apply)
    assert gate.request(request("write_file", '{"path": "docs/a"}')) == Decision.ALLOW_ONCE
    assert gate.request(request("read_file", '{"path": "other"}')) == Decision.ALLOW_ONCE
    assert gate.request(request("write_file", '{"path": "x"}')) == Decision.REJECT_ONCE

    plain = RulesGate(AllowAll(), RuleSet(), RuleSet(), "/r", "/r", caps)
    assert not plain.gates_read_only


def test_a_symlink_is_judged_by_its_target(tmp_path):
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "key").write_text("k")
    (tmp_path / "innocent").symlink_to(tmp_path / "private" / "key")
    rules = parse_rules(["read_file"], ["read_file(private/**)"])
    assert decide("read_file", {"path": "innocent"}, rules, root=str(tmp_path), cwd=str(tmp_path)).outcome == "deny"
