"""Hooks end to end through `openheim run`: scripts that allow, deny and rewrite tool calls, add notes and
context, block a prompt, observe the stop; failures and timeouts are one warning and fail closed for pre_tool."""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap

import pytest
from cli_helpers import fake_provider, openheim
from fake_llm import Reply, ToolCall

from openheim.config.hooks import parse_hooks
from openheim.core.hooks import parse_answer
from openheim.errors import ConfigError


def script(tmp_path, name: str, body: str) -> str:
    """A Python hook script; returns the command that runs it."""
    path = tmp_path / name
    path.write_text("import json, os, sys\ncall = json.load(sys.stdin)\n" + textwrap.dedent(body))
    return f"{sys.executable} {path}"


def hooks_toml(*entries: dict) -> str:
    out = []
    for entry in entries:
        out.append("[[hooks]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in entry.items()))
    return "\n".join(out)


def tool_results(request) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


def write_call(path: str, content: str = "hello") -> Reply:
    return Reply(tool_calls=[ToolCall("write_file", {"path": path, "content": content})])


def test_answers_follow_the_common_conventions():
    assert parse_answer(2, "", "no secrets\n", False).blocked
    assert parse_answer(2, "", "no secrets\n", False).reason == "no secrets"
    assert parse_answer(1, "", "boom", False).failed == "exited with 1: boom"
    deny = parse_answer(
        0,
        json.dumps({"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "nope"}}),
        "",
        False,
    )
    assert deny.decision == "deny" and deny.blocked and deny.reason == "nope"
    assert parse_answer(0, '{"decision": "approve"}', "", False).decision == "allow"
    rewrite = parse_answer(0, json.dumps({"hookSpecificOutput": {"updatedInput": {"path": "b"}}}), "", False)
    assert rewrite.updated_input == {"path": "b"} and rewrite.decision is None
    assert parse_answer(0, "plain words", "", True).context == "plain words"
    assert parse_answer(0, "plain words", "", False).context == ""
    assert parse_answer(0, "{not json", "", False).failed


def test_config_errors_name_the_entry():
    with pytest.raises(ConfigError, match=r"hooks\[0\].event must be one of"):
        parse_hooks([{"event": "before", "command": "x"}], "config")
    with pytest.raises(ConfigError, match=r"hooks\[1\].matcher applies only to pre_tool"):
        parse_hooks(
            [{"event": "stop", "command": "x"}, {"event": "stop", "command": "x", "matcher": "read_file"}], "config"
        )
    with pytest.raises(ConfigError, match="timeout_secs must be a positive number"):
        parse_hooks([{"event": "stop", "command": "x", "timeout_secs": 0}], "config")
    (hook,) = parse_hooks([{"event": "pre_tool", "command": "x", "matcher": "write_file(secret/**)"}], "config")
    assert hook.timeout_secs == 30 and str(hook.matcher) == "write_file(secret/**)"


def test_pre_tool_hooks_deny_allow_and_rewrite(isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    deny = script(
        tmp_path,
        "deny.py",
        """
        print("secrets stay put: " + call["tool_input"]["path"], file=sys.stderr)
        sys.exit(2)
    """,
    )
    rewrite = script(
        tmp_path,
        "rewrite.py",
        """
        args = dict(call["tool_input"], content=call["tool_input"]["content"].upper())
        assert call["hook_event_name"] == "PreToolUse" and call["tool_name"] == "write_file"
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                                                 "updatedInput": args}}))
    """,
    )
    extra = hooks_toml(
        {"event": "pre_tool", "matcher": "write_file(secret/**)", "command": deny},
        {"event": "pre_tool", "matcher": "write_file(src/**)", "command": rewrite},
    )
    with fake_provider("openai", isolated_home, extra=extra) as srv:
        srv.enqueue(write_call("secret/key.txt"), write_call("src/a.txt"), write_call("notes.txt"), Reply(text="done"))
        # --approve reads: a write runs only when a hook allows it
        r = openheim("run", "--approve", "reads", "write three files", cwd=work)
        assert r.returncode == 0, r.stderr
        results = [tool_results(srv.requests[i])[-1] for i in (1, 2, 3)]
    assert results[0] == "Blocked by hook: secrets stay put: secret/key.txt"
    assert not (work / "secret").exists()
    assert (work / "src" / "a.txt").read_text() == "HELLO"  # allowed by the hook and rewritten
    assert "Permission denied by policy (--approve reads)" in results[2]  # no hook matched: the policy decides
    assert not (work / "notes.txt").exists()


def test_a_hooks_allow_never_beats_a_deny_rule(isolated_home, tmp_path):
    allow = script(tmp_path, "allow.py", 'print(json.dumps({"decision": "approve"}))\n')
    extra = hooks_toml({"event": "pre_tool", "command": allow})
    with fake_provider("openai", isolated_home, extra=extra) as srv:
        srv.enqueue(write_call("a.txt"), Reply(text="done"))
        r = openheim("run", "--deny", "write_file", "write", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "Permission denied by rule" in tool_results(srv.requests[1])[-1]
    assert not (tmp_path / "a.txt").exists()


def test_failing_and_slow_hooks_warn_once_and_fail_closed_before_a_call(isolated_home, tmp_path):
    extra = hooks_toml(
        {"event": "pre_tool", "matcher": "write_file(a.txt)", "command": "exit 1"},
        {"event": "pre_tool", "matcher": "write_file(b.txt)", "command": "sleep 5", "timeout_secs": 0.3},
        {"event": "post_tool", "command": "exit 3"},
    )
    with fake_provider("openai", isolated_home, extra=extra) as srv:
        srv.enqueue(write_call("a.txt"), write_call("b.txt"), write_call("c.txt"), Reply(text="done"))
        r = openheim("run", "write", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        results = [tool_results(srv.requests[i])[-1] for i in (1, 2, 3)]
    assert "failed (exited with 1)" in results[0] and "refuses the call" in results[0]
    assert "timed out after 0.3s" in results[1]
    assert not (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()
    assert (tmp_path / "c.txt").exists() and "[hook]" not in results[2]  # post_tool fails open
    warnings = [line for line in r.stderr.splitlines() if "hook failed" in line]
    assert len(warnings) == 3, r.stderr  # pre_tool for a.txt and b.txt; post_tool for c.txt, the one call that ran


def test_notes_context_blocked_prompts_and_stop(isolated_home, tmp_path):
    log = tmp_path / "hook.log"
    note = script(
        tmp_path,
        "note.py",
        """
        ok = call["tool_response"]["is_error"] is False and call["tool_input"]["path"] == "a.txt"
        print(json.dumps({"hookSpecificOutput": {"additionalContext": f"formatted (saw result: {ok})"}}))
    """,
    )
    record = script(
        tmp_path,
        "record.py",
        f"""
        secret = os.environ.get("FAKE_API_KEY", "")
        with open({str(log)!r}, "a") as f:
            f.write(json.dumps({{**call, "env_secret": secret}}) + "\\n")
        if call["openheim_event"] == "session_start":
            print("The team's style guide: be brief.")
        if call["openheim_event"] == "user_prompt" and "password" in call["prompt"]:
            print("prompts must not hold passwords", file=sys.stderr)
            sys.exit(2)
        if call["openheim_event"] == "user_prompt":
            print(json.dumps({{"hookSpecificOutput": {{"additionalContext": "Ticket: OH-31"}}}}))
    """,
    )
    extra = hooks_toml(
        {"event": "post_tool", "matcher": "write_file", "command": note},
        {"event": "session_start", "command": record},
        {"event": "user_prompt", "command": record},
        {"event": "stop", "command": record},
    )
    env = {"FAKE_API_KEY": "sk-hidden-from-hooks"}
    provider = 'env_var = "FAKE_API_KEY"'
    with fake_provider("openai", isolated_home, extra=extra, provider_extra=provider) as srv:
        srv.enqueue(write_call("a.txt"), Reply(text="done"))
        r = openheim("run", "-o", "json", "write a.txt", cwd=tmp_path, env=env)
        assert r.returncode == 0, r.stderr
        session = json.loads(r.stdout)["session_id"]
        result = tool_results(srv.requests[1])[-1]
        assert result.startswith("Successfully wrote to ")
        assert result.endswith("a.txt\n\n[hook] formatted (saw result: True)")
        prompt = srv.requests[0].body["messages"][-1]["content"]
        texts = [b["text"] for b in prompt] if isinstance(prompt, list) else [prompt]
        assert "write a.txt" in texts[0]
        assert "The team's style guide: be brief." in "".join(texts) and "Ticket: OH-31" in "".join(texts)
        r = openheim("run", "-s", session, "my password is hunter2", cwd=tmp_path, env=env)
        assert r.returncode == 1
        assert r.stderr.strip() == (
            "Error: Prompt blocked by a hook: prompts must not hold passwords (the prompt was not sent)"
        )
        assert len(srv.requests) == 2
    history = (isolated_home / "history" / f"{session}.jsonl").read_text()
    assert "hunter2" not in history and "Ticket: OH-31" in history
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["openheim_event"] for c in calls] == [
        "session_start",
        "user_prompt",
        "stop",
        "session_start",
        "user_prompt",
    ]
    assert calls[0]["source"] == "startup" and calls[3]["source"] == "resume"
    assert calls[2]["hook_event_name"] == "Stop" and calls[2]["stop_reason"] == "end_turn"
    assert calls[2]["last_assistant_message"] == "done" and calls[0]["session_id"] == session
    assert all(c["env_secret"] == "" and c["cwd"] == str(tmp_path) for c in calls)


def test_project_hooks_wait_for_trust(isolated_home, tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / ".openheim").mkdir()
    (tmp_path / ".openheim" / "settings.toml").write_text(
        hooks_toml({"event": "user_prompt", "command": f"touch {marker}"})
    )
    with fake_provider("openai", isolated_home) as srv:
        srv.enqueue(Reply(text="hi"))
        r = openheim("run", "hello", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert "has hooks that do not run until you trust it" in r.stderr
    # trusted as it is now (what `openheim permissions trust FILE` records): the hook runs
    settings = (tmp_path / ".openheim" / "settings.toml").resolve()
    sha = hashlib.sha256(settings.read_bytes()).hexdigest()
    (isolated_home / "settings-trust.json").write_text(json.dumps({"files": {str(settings): {"sha256": sha}}}))
    with fake_provider("openai", isolated_home) as srv:
        srv.enqueue(Reply(text="hi"), Reply(text="hi"))
        r = openheim("run", "hello", cwd=tmp_path)
        assert r.returncode == 0 and marker.exists(), r.stderr
        marker.unlink()
        settings.write_text(settings.read_text() + "\n# changed\n")  # a changed file needs trusting again
        r = openheim("run", "hello", cwd=tmp_path)
        assert r.returncode == 0 and not marker.exists(), r.stderr


def test_permissions_explain_shows_the_hook_that_would_decide(isolated_home, tmp_path):
    extra = hooks_toml({"event": "pre_tool", "matcher": "write_file(src/**)", "command": "guard.sh"})
    with fake_provider("openai", isolated_home, extra=extra):
        r = openheim("permissions", "explain", "write_file", '{"path": "src/a.py"}', cwd=tmp_path)
        other = openheim("permissions", "explain", "write_file", '{"path": "docs/a.md"}', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "hook: pre_tool write_file(src/**) hook `guard.sh`" in r.stdout
    assert "(unless a hook above decides)" in r.stdout
    assert "hook:" not in other.stdout


def test_a_stop_hook_can_make_the_model_go_on_once(isolated_home, tmp_path):
    log = tmp_path / "stops.jsonl"
    stop = script(
        tmp_path,
        "stop.py",
        f"""
        with open({str(log)!r}, "a") as f:
            f.write(json.dumps(call) + "\\n")
        if not call["stop_hook_active"]:
            print(json.dumps({{"decision": "block", "reason": "run the tests first"}}))
    """,
    )
    with fake_provider("openai", isolated_home, extra=hooks_toml({"event": "stop", "command": stop})) as srv:
        srv.enqueue(Reply(text="done", usage=(10, 2)), Reply(text="tests pass, done", usage=(20, 3)))
        r = openheim("run", "-o", "json", "fix it", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["text"] == "tests pass, done" and out["iterations"] == 2
    assert out["usage"]["input_tokens"] == 30 and out["usage"]["output_tokens"] == 5
    assert "run the tests first" in srv.requests[1].body["messages"][-1]["content"]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["stop_hook_active"] for c in calls] == [False, True]
    assert calls[1]["last_assistant_message"] == "tests pass, done"
