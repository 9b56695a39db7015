"""Long sessions end to end through the CLI: compaction, checkpoints and undo (git repo or not), fork."""

from __future__ import annotations

import json

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply
from long_helpers import SUMMARY, SummarisingServer, changing_turn, git, seed_tree, tree

from openheim.client import OpenheimClient
from openheim.conversation.compaction import SUMMARY_PROMPT

WINDOW = 2200  # tokens (the built-in tools, update_plan included, take about 1k of it)


def _stored(data, session_id: str) -> tuple[list[dict], list[dict]]:
    lines = [json.loads(x) for x in (data / "history" / f"{session_id}.jsonl").read_text().splitlines()]
    return [x for x in lines if "role" in x], [x for x in lines if x.get("event") == "compaction"]


def test_thirty_turns_in_a_2k_window_keep_going_and_resume_from_the_summary(isolated_home, tmp_path):
    with SummarisingServer() as srv:
        write_config(isolated_home, srv.base_url, provider_extra=f"context_window = {WINDOW}")
        with OpenheimClient.builder().build() as client:
            session = client.new_session(tmp_path)
            for turn in range(28):
                result = session.prompt(f"turn {turn}: remember the number {turn}. " * 6)
                assert result.stop_reason.value == "end_turn", turn
        # the last turns through the CLI: stream-json shows the compaction, json's usage counts the summary call
        before = len(srv.summary_requests)
        streams = [
            openheim("run", "--continue", "-o", "stream-json", f"turn {t}: remember {t}. " * 6, cwd=tmp_path)
            for t in (28, 29)
        ]
        assert all(p.returncode == 0 for p in streams), streams[-1].stderr
        lines = [json.loads(x) for p in streams for x in p.stdout.splitlines()]
        compactions = [x for x in lines if x["type"] == "compaction"]
        assert compactions and compactions[0]["error"] is None and compactions[0]["summary"] == SUMMARY
        assert len(srv.summary_requests) == before + len(compactions)
        result = [x for x in lines if x["type"] == "result"][-1]
        session_id = result["session_id"]
        for p in streams:  # -o json/stream-json usage: the turn's calls plus the summary call
            turn = [json.loads(x) for x in p.stdout.splitlines()]
            calls = sum(sum(x["usage"].values()) for x in turn if x["type"] == "usage")
            summary = sum(sum((x["usage"] or {}).values()) for x in turn if x["type"] == "compaction")
            total = sum(next(x for x in turn if x["type"] == "result")["usage"].values())
            assert total == calls + summary
        # the summary request carried the dedicated prompt; every request stayed inside the window
        assert len(srv.summary_requests) >= 3
        assert SUMMARY_PROMPT in srv.summary_requests[-1]["messages"][-1]["content"]
        assert all(len(r.raw) < WINDOW * 4 for r in srv.requests)
        # the log has the full record (60 messages) and the compaction events
        messages, events = _stored(isolated_home, session_id)
        assert len(messages) == 60 and len(events) == len(srv.summary_requests)
        assert messages[0]["content"][0]["text"].startswith("turn 0:")
        # --continue resumes from the compacted state: the summary, not turn 0
        follow = openheim("run", "--continue", "-o", "json", "and now?", cwd=tmp_path)
        assert follow.returncode == 0, follow.stderr
        sent = json.dumps(srv.requests[-1].body["messages"])
        assert SUMMARY.splitlines()[1] in sent and "turn 0:" not in sent
        shown = openheim("sessions", "show", session_id)
        assert "turn 0:" in shown.stdout and "── compacted automatically" in shown.stdout
        assert SUMMARY in shown.stdout


def test_json_usage_includes_the_summary_call_and_manual_compaction(isolated_home, tmp_path):
    with SummarisingServer() as srv:
        write_config(isolated_home, srv.base_url)  # no window for this provider kind: only manual compaction
        srv.enqueue(Reply(text="first", usage=(100, 10)))
        first = openheim("run", "-o", "json", "hello there", cwd=tmp_path)
        session_id = json.loads(first.stdout)["session_id"]
        compact = openheim("sessions", "compact", session_id)
        assert compact.returncode == 0, compact.stderr
        assert "compacted" in compact.stdout and len(srv.summary_requests) == 1
        _, events = _stored(isolated_home, session_id)
        assert len(events) == 1 and events[0]["manual"] is True and events[0]["keep_from"] == 2
        srv.enqueue(Reply(text="second", usage=(50, 5)))
        again = openheim("run", "--continue", "-o", "json", "go on", cwd=tmp_path)
        sent = srv.requests[-1].body["messages"]
        assert SUMMARY.splitlines()[1] in json.dumps(sent) and "hello there" not in json.dumps(sent)
        assert json.loads(again.stdout)["usage"]["input_tokens"] == 50  # no compaction in this turn


def test_a_failed_summary_falls_back_to_fitting(isolated_home, tmp_path):
    from fake_llm import Fault

    class Failing(SummarisingServer):
        def next_item(self, body):
            if "compacting a long conversation" in str(body["messages"][0].get("content")):
                self.summary_requests.append(body)
                return Fault(status=400, body={"error": {"message": "no summaries today"}})
            return FakeLLMServer.next_item(self, body)

    with Failing() as srv:
        write_config(isolated_home, srv.base_url, provider_extra=f"context_window = {WINDOW}")
        with OpenheimClient.builder().build() as client:
            session = client.new_session(tmp_path)
            seen = []
            for turn in range(12):
                assert (
                    session.prompt(f"turn {turn}: " + "words " * 80, on_event=seen.append).stop_reason.value
                    == "end_turn"
                )
        assert srv.summary_requests, "compaction was attempted"
        assert any(e.kind == "compaction" and e.error for e in seen)
        assert any(e.kind == "context_trimmed" for e in seen)


@pytest.mark.parametrize("repo", ["git", "plain"])
def test_a_turn_that_changes_files_is_undone_exactly(isolated_home, tmp_path, repo):
    root = tmp_path / "project"
    seed_tree(root)
    if repo == "git":
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-qm", "seed")
        objects_before = git(root, "count-objects", "-v")
    original = tree(root)
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, extra="allow_shell = true")
        srv.enqueue(*changing_turn())
        run = openheim("run", "-o", "json", "change some files", cwd=root)
        assert run.returncode == 0, run.stderr
    changed = tree(root)
    assert "new/added.txt" in changed and "shell_made.txt" in changed and "doomed.txt" not in changed
    assert changed["edit_me.txt"] == "alpha\nBETA\ngamma\n"
    session_id = json.loads(run.stdout)["session_id"]
    shown = openheim("sessions", "show", session_id, "--changes")
    for line in ("A new/added.txt", "A shell_made.txt", "M edit_me.txt", "M overwritten.txt", "D doomed.txt"):
        assert line in shown.stdout
    assert "build/" not in shown.stdout and "keep.txt" not in shown.stdout
    refused = openheim("undo", cwd=root)  # no terminal to ask on: --yes is needed
    assert refused.returncode != 0 and "--yes" in refused.stderr and tree(root) == changed
    undo = openheim("undo", "--yes", cwd=root)
    assert undo.returncode == 0, undo.stderr
    assert "A new/added.txt" in undo.stdout and "remove new/added.txt (the turn created it)" in undo.stdout
    assert "M edit_me.txt | +1 -1" in undo.stdout and "D doomed.txt" in undo.stdout
    assert tree(root) == original
    assert not (root / "new").exists()
    if repo == "git":
        assert git(root, "status", "--porcelain") == ""
        assert git(root, "count-objects", "-v") == objects_before  # nothing went into the user's .git
    again = openheim("undo", "--yes", cwd=root)
    assert again.returncode != 0 and "no file changes to undo" in again.stderr


def test_a_file_edited_since_is_protected_unless_forced(isolated_home, tmp_path):
    root = tmp_path / "project"
    seed_tree(root)
    original = tree(root)
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, extra="allow_shell = true")
        srv.enqueue(*changing_turn())
        assert openheim("run", "change some files", cwd=root).returncode == 0
    (root / "edit_me.txt").write_text("the user's own edit\n")
    after_user = tree(root)
    refused = openheim("undo", "--yes", cwd=root)
    assert refused.returncode != 0
    assert "edit_me.txt" in refused.stderr and "--force" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert tree(root) == after_user
    forced = openheim("undo", "--yes", "--force", cwd=root)
    assert forced.returncode == 0, forced.stderr
    assert tree(root) == original


def test_fork_gives_two_independent_sessions(isolated_home, tmp_path):
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        first = json.loads(openheim("run", "-o", "json", "the shared start", cwd=tmp_path).stdout)
        fork = openheim(
            "run", "--session", first["session_id"], "--fork", "-o", "json", "only in the fork", cwd=tmp_path
        )
        assert fork.returncode == 0, fork.stderr
        forked = json.loads(fork.stdout)["session_id"]
        assert forked != first["session_id"]
        assert "the shared start" in json.dumps(srv.requests[-1].body["messages"])
        original = openheim("run", "--session", first["session_id"], "-o", "json", "only in the original", cwd=tmp_path)
        assert original.returncode == 0
        assert "only in the fork" not in json.dumps(srv.requests[-1].body["messages"])
    fork_messages, _ = _stored(isolated_home, forked)
    original_messages, _ = _stored(isolated_home, first["session_id"])
    assert len(fork_messages) == len(original_messages) == 4
    assert fork_messages[:2] == original_messages[:2] and fork_messages[2] != original_messages[2]
    bad = openheim("run", "--fork", "x", cwd=tmp_path)
    assert bad.returncode != 0 and "--session" in bad.stderr
