"""A reply cut short is kept: Ctrl-C, SIGTERM/SIGHUP and a time budget leave what had streamed in the session,
marked as interrupted; `sessions show` and `--continue` see it, the model is sent it, and `run -o json`
carries the streamed text with `error` and `exit_code`."""

from __future__ import annotations

import json
import signal
import time

import pytest
from cli_helpers import openheim, spawn, write_config
from fake_llm import FakeLLMServer, Fault, Reply

SLOW = Reply(text="word " * 400 + "NEVER", delay=0.02)


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


def stop_mid_stream(srv, sig: int, *args: str, cwd) -> tuple[dict, int]:
    srv.enqueue(SLOW)
    proc = spawn("run", "-o", "json", *args, "tell me", cwd=cwd)
    deadline = time.monotonic() + 10
    while not srv.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.4)  # some words have streamed
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=10)
    assert "Traceback" not in err
    return json.loads(out.splitlines()[-1]), proc.returncode


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_signal_keeps_the_streamed_text(srv, tmp_path, isolated_home, sig, code):
    obj, rc = stop_mid_stream(srv, sig, cwd=tmp_path)
    assert rc == code and obj["exit_code"] == code
    assert obj["error"]["kind"] == "interrupted"
    assert obj["text"].startswith("word word") and "NEVER" not in obj["text"]
    shown = openheim("sessions", "show", obj["session_id"]).stdout
    assert "word word" in shown and "(note) Reply interrupted: stopped by the user." in shown
    srv.enqueue(Reply(text="continued"))
    r = openheim("run", "--continue", "go on", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "continued\n"
    sent = srv.requests[-1].body["messages"]
    assert [m["role"] for m in sent[-3:]] == ["user", "assistant", "user"]
    assert sent[-2]["content"].startswith("word word") and "Reply interrupted" in sent[-2]["content"]


def test_time_budget_keeps_the_streamed_text(srv, tmp_path):
    srv.enqueue(SLOW)
    r = openheim("run", "-o", "json", "--timeout", "0.6", "tell me", cwd=tmp_path)
    assert r.returncode == 6
    obj = json.loads(r.stdout)
    assert obj["stop_reason"] == "budget" and obj["exit_code"] == 6 and obj["error"]["kind"] == "budget"
    assert obj["text"].startswith("word word") and "NEVER" not in obj["text"]
    shown = openheim("sessions", "show", obj["session_id"]).stdout
    assert "word word" in shown and "(note) Reply interrupted: the turn's time budget (0.6s) ran out." in shown


def test_a_reply_that_ended_has_no_error(srv, tmp_path):
    srv.enqueue(Reply(text="whole"))
    obj = json.loads(openheim("run", "-o", "json", "hi", cwd=tmp_path).stdout)
    assert obj["text"] == "whole" and "error" not in obj and "exit_code" not in obj


def test_a_stream_that_breaks_off_keeps_what_came(srv, tmp_path):
    srv.enqueue(Fault(drop_after_chunks=6, reply=Reply(text="first words of a reply that never ends", chunk_size=4)))
    r = openheim("run", "-o", "json", "tell me", cwd=tmp_path)
    assert r.returncode == 1
    obj = json.loads(r.stdout)
    streamed = "first words of a reply that never ends"[:24]  # 6 chunks of 4 characters
    assert obj["text"] == streamed and obj["error"]["kind"] in ("incomplete_response", "transport_error")
    shown = openheim("sessions", "show", obj["session_id"]).stdout
    assert streamed in shown and "(note) Reply interrupted: the stream failed:" in shown
    srv.enqueue(Reply(text="again"))
    assert openheim("run", "--continue", "go on", cwd=tmp_path).stdout == "again\n"
    assert "Reply interrupted" in srv.requests[-1].body["messages"][-2]["content"]
