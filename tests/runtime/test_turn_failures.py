"""A turn that fails never leaves the conversation in a shape a provider refuses.

Whatever can fail before the model is asked (bad metadata, the lease, storing the prompt) fails before the
prompt is stored; a prompt that was stored and then got no reply (provider error, full disk, cancel, kill) is
answered with a stand-in in the next request. The log itself stays append-only.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Fault, Reply

from openheim.core.agent import NO_REPLY, repair_missing_results
from openheim.core.models import Message


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


def _run_json(*args: str, cwd: Path) -> dict:
    r = openheim("run", "-o", "json", *args, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _roles(request) -> list[str]:
    return [m["role"] for m in request.body["messages"] if m["role"] != "system"]


def _log_texts(home: Path, sid: str) -> list[str]:
    lines = (home / "history" / f"{sid}.jsonl").read_text().splitlines()
    return [json.loads(line)["content"][0].get("text", "") for line in lines if line.strip()]


def test_metadata_that_fails_validation_stores_no_prompt(srv, tmp_path, isolated_home):
    sid = _run_json("first", cwd=tmp_path)["session_id"]
    meta = isolated_home / "history" / f"{sid}.json"
    doc = json.loads(meta.read_text())
    doc["meta"]["mode"] = "yolo"
    meta.write_text(json.dumps(doc))
    log_before = (isolated_home / "history" / f"{sid}.jsonl").read_bytes()
    sent = len(srv.requests)
    r = openheim("run", "-s", sid, "second", cwd=tmp_path)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(meta) in lines[0] and "'yolo'" in lines[0] and "code, architect" in lines[0]
    assert (isolated_home / "history" / f"{sid}.jsonl").read_bytes() == log_before
    assert len(srv.requests) == sent


def test_a_prompt_the_provider_failed_is_answered_by_a_stand_in_next_turn(srv, tmp_path, isolated_home):
    sid = _run_json("first", cwd=tmp_path)["session_id"]
    srv.enqueue(Fault(status=400))
    r = openheim("run", "-s", sid, "this one fails", cwd=tmp_path)
    assert r.returncode == 1 and "HTTP 400" in r.stderr
    assert _log_texts(isolated_home, sid) == ["first", "echo: first", "this one fails"]  # nothing removed
    _run_json("-s", sid, "third", cwd=tmp_path)
    request = srv.requests[-1]
    assert _roles(request) == ["user", "assistant", "user", "assistant", "user"]
    assert request.body["messages"][-2]["content"] == NO_REPLY
    assert _log_texts(isolated_home, sid) == ["first", "echo: first", "this one fails", "third", "echo: third"]


def test_a_prompt_held_by_another_process_is_not_stored(srv, tmp_path, isolated_home):
    """Losing the lease: the run fails before its prompt is stored."""
    sid = _run_json("first", cwd=tmp_path)["session_id"]
    holder = subprocess.Popen(["sleep", "60"])
    try:
        lock = isolated_home / "history" / f"{sid}.lock"
        from openheim.conversation.lease import LeaseRecord, hostname, process_start

        lock.write_text(LeaseRecord(holder.pid, hostname(), "now", process_start(holder.pid)).to_json())
        r = openheim("run", "-s", sid, "second", cwd=tmp_path)
        assert r.returncode == 1 and "active in another process" in r.stderr
    finally:
        holder.kill()
        holder.wait()
    assert _log_texts(isolated_home, sid) == ["first", "echo: first"]


def test_repair_gives_every_unanswered_prompt_a_stand_in() -> None:
    history = [Message.user("a"), Message.user("b"), Message.assistant("B"), Message.user("c"), Message.user("d")]
    assert [(m.role, m.text()) for m in repair_missing_results(history)] == [
        ("user", "a"),
        ("assistant", NO_REPLY),
        ("user", "b"),
        ("assistant", "B"),
        ("user", "c"),
        ("assistant", NO_REPLY),
        ("user", "d"),
    ]


# --- a real full disk: a tiny tmpfs as the data directory --------------------------------------------------


@pytest.fixture
def tiny_disk(tmp_path):
    """A 256 KiB tmpfs (needs root and mount, as in CI); skipped where it cannot be mounted."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root and mount permission): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(disk: Path, leave_pages: int = 0) -> Path:
    """Fill ``disk`` completely, then free ``leave_pages`` pages of 4 KiB."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    if leave_pages:
        os.truncate(filler, max(0, filler.stat().st_size // 4096 - leave_pages) * 4096)
    return filler


def _disk_env(disk: Path) -> dict:
    return {"OPENHEIM_HOME": str(disk)}


def test_a_full_disk_stores_no_prompt_and_asks_no_model(tiny_disk, tmp_path):
    with FakeLLMServer(wire="openai") as srv:
        write_config(tiny_disk, srv.base_url)
        r = openheim("run", "-o", "json", "first", cwd=tmp_path, env=_disk_env(tiny_disk))
        assert r.returncode == 0, r.stderr
        sid = json.loads(r.stdout)["session_id"]
        log = tiny_disk / "history" / f"{sid}.jsonl"
        before = log.read_bytes()
        _fill(tiny_disk, leave_pages=1)  # room for the lock file, not for an 8 KiB prompt
        r = openheim("run", "-s", sid, "big " * 2048, cwd=tmp_path, env=_disk_env(tiny_disk))
        assert r.returncode == 1
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and f"could not write {log}: No space left on device" in lines[0], r.stderr
        assert "free some disk space" in lines[0]
        assert len(srv.requests) == 1  # the model was never asked
        assert log.read_bytes().startswith(before)
        assert (
            json.loads(openheim("sessions", "show", "--json", sid, env=_disk_env(tiny_disk)).stdout)["messages"][-1][
                "content"
            ][0]["text"]
            == "echo: first"
        )


def test_a_reply_lost_to_a_full_disk_leaves_a_log_the_next_turn_can_send(tiny_disk, tmp_path):
    with FakeLLMServer(wire="openai") as srv:
        write_config(tiny_disk, srv.base_url)
        r = openheim("run", "-o", "json", "first", cwd=tmp_path, env=_disk_env(tiny_disk))
        sid = json.loads(r.stdout)["session_id"]
        filler = _fill(tiny_disk, leave_pages=1)  # the lock file and the short prompt fit, a 20 KiB reply does not
        srv.enqueue(Reply(text="y" * 20000, chunk_size=5000))
        r = openheim("run", "-s", sid, "short", cwd=tmp_path, env=_disk_env(tiny_disk))
        assert r.returncode == 1 and "No space left on device" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        filler.unlink()
        r = openheim("run", "-s", sid, "after", cwd=tmp_path, env=_disk_env(tiny_disk))
        assert r.returncode == 0, r.stderr
        # the turn that could not be saved was rolled back whole: no unanswered "short" is sent
        assert _roles(srv.requests[-1]) == ["user", "assistant", "user"]
