"""Session ids as a user types them: a unique prefix works wherever an id is taken (like git), an ambiguous one
lists the candidates; a session whose first turn failed before any reply is out of the lists but for --all."""

from __future__ import annotations

import json
import shutil
import uuid

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Fault, Reply


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


def new_session(tmp_path, prompt: str = "hi") -> str:
    r = openheim("run", "-o", "json", prompt, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["session_id"]


def test_a_unique_prefix_works_everywhere(srv, tmp_path, isolated_home):
    sid = new_session(tmp_path, "first words")
    other = new_session(tmp_path, "other words")
    prefix = next(sid[:n] for n in range(4, 36) if not other.startswith(sid[:n]))
    assert "user: first words" in openheim("sessions", "show", prefix).stdout
    srv.enqueue(Reply(text="resumed"))
    r = openheim("run", "-o", "json", "--session", prefix, "again", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["session_id"] == sid
    assert srv.requests[-1].body["messages"][1]["content"] == "first words"
    from openheim import OpenheimClient  # the library (and so ACP session/load, which goes through it)

    with OpenheimClient.builder().config_path(isolated_home / "config.toml").build() as client:
        handle, loaded = client.resume_session(prefix.upper(), tmp_path)
        assert handle.id == sid and loaded.messages[0].text() == "first words"
    r = openheim("sessions", "delete", prefix)
    assert r.returncode == 0 and r.stdout.strip() == f"deleted {sid}"
    assert sid not in openheim("sessions", "list").stdout


def test_an_ambiguous_prefix_lists_the_candidates(srv, tmp_path, isolated_home):
    sid = new_session(tmp_path, "the original")
    twin = sid[:8] + str(uuid.uuid4())[8:]
    history = isolated_home / "history"
    meta = json.loads((history / f"{sid}.json").read_text())
    meta["meta"]["id"] = twin
    (history / f"{twin}.json").write_text(json.dumps(meta))
    shutil.copy(history / f"{sid}.jsonl", history / f"{twin}.jsonl")
    r = openheim("sessions", "show", sid[:6])
    assert r.returncode == 2
    line = r.stderr.strip()
    assert line.startswith(f"Error: Invalid argument: session id prefix '{sid[:6]}' is ambiguous: it matches ")
    assert sid[:13] in line and twin[:13] in line and "(the original)" in line and line.endswith("give more characters")
    r = openheim("sessions", "show", "ffff0000")
    assert r.returncode == 1 and "no session id starts with 'ffff0000'" in r.stderr
    r = openheim("sessions", "show", "ab")
    assert r.returncode == 2 and "too short: give at least 4 characters" in r.stderr


def test_a_session_that_never_got_a_reply_is_hidden(srv, tmp_path):
    good = new_session(tmp_path, "a good one")
    srv.enqueue(Fault(status=401))
    r = openheim("run", "-o", "json", "hi", cwd=tmp_path)
    assert r.returncode == 1
    failed = json.loads(r.stdout)["session_id"]
    listed = openheim("sessions", "list").stdout
    assert good in listed and failed not in listed
    everything = openheim("sessions", "list", "--all").stdout
    row = next(line for line in everything.splitlines() if failed in line)
    assert row.endswith("(failed: no reply)")
    srv.enqueue(Reply(text="continued"))
    r = openheim("run", "-o", "json", "--continue", "more", cwd=tmp_path)
    assert json.loads(r.stdout)["session_id"] == good  # --continue skips it too
    srv.enqueue(Reply(text="now it works"))
    assert openheim("run", "--session", failed, "retry", cwd=tmp_path).returncode == 0
    assert failed in openheim("sessions", "list").stdout  # a reply: listed again
