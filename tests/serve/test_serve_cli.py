"""`openheim serve` as a user runs it: a subprocess, its flags, and a graceful stop on SIGTERM/SIGINT."""

from __future__ import annotations

import json
import re
import signal
import socket
import time
import urllib.request

import pytest
from cli_helpers import openheim, spawn
from fake_llm import Reply
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect


def start(project, *args: str, env: dict | None = None):
    """A `serve` subprocess, its base URL and the token its first line shows (None when it shows none)."""
    proc = spawn("serve", "--port", "0", *args, cwd=project, env=env)
    line = proc.stderr.readline()
    match = re.search(r"listening on (http://\S+?)/(?:\?token=(\S+))? ", line)
    if not match:
        proc.kill()
        raise AssertionError(f"no listening line: {line!r} {proc.stderr.read()}")
    return proc, match.group(1), match.group(2)


def stop(proc, sig=signal.SIGTERM) -> tuple[int, str]:
    """Signal ``proc`` (None: it was signalled already) and wait for it to exit."""
    if sig is not None:
        proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def test_sigterm_cancels_running_turns_saves_them_and_closes_sockets_with_1001(srv, project, isolated_home):
    proc, base, token = start(project)
    try:
        config = json.load(urllib.request.urlopen(f"{base}/api/config?token={token}"))
        assert config["work_dir"] == str(project)  # no work_dir configured: the directory serve started in
        srv.enqueue(Reply(text=" ".join(["slowly"] * 300), delay=0.05))
        with connect(base.replace("http", "ws") + f"/acp?token={token}") as ws:

            def call(request_id, method, params):
                ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))

            call(1, "initialize", {"protocolVersion": 1})
            call(2, "session/new", {"cwd": str(project), "mcpServers": []})
            frames = [json.loads(ws.recv(timeout=10)) for _ in range(2)]
            sid = frames[1]["result"]["sessionId"]
            call(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "take your time"}]})
            while True:  # the turn is streaming
                frame = json.loads(ws.recv(timeout=10))
                if frame.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk":
                    break
            proc.send_signal(signal.SIGTERM)
            answer = None
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    frame = json.loads(ws.recv(timeout=10))
                    if frame.get("id") == 3:
                        answer = frame
            assert answer == {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "cancelled"}}
            assert closed.value.rcvd.code == 1001
        code, err = stop(proc, None)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0, err
    assert "shutting down" in err and "Traceback" not in err
    log = (isolated_home / "history" / f"{sid}.jsonl").read_text().splitlines()
    assert json.loads(log[0])["role"] == "user" and "take your time" in log[0]


def test_ctrl_c_stops_an_idle_server_cleanly(srv, project):
    proc, base, _ = start(project)
    assert urllib.request.urlopen(f"{base}/").status == 200
    code, err = stop(proc, signal.SIGINT)
    assert code == 0 and "Traceback" not in err


def test_a_network_address_without_a_token_is_refused(srv, project):
    r = openheim("serve", "--host", "0.0.0.0", "--port", "0", cwd=project)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "Error: Config error: binding 0.0.0.0 makes the agent reachable from the network, so it needs a token: "
        "set OPENHEIM_SERVE_TOKEN (or pass --token) to a long random string"
    ]


def test_token_from_the_environment_guards_every_request(srv, project):
    proc, base, shown = start(project, env={"OPENHEIM_SERVE_TOKEN": "from-the-env"})
    assert shown is None  # a token the user set is never printed
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/api/models")
        assert refused.value.code == 401
        refused.value.close()
        assert json.load(urllib.request.urlopen(f"{base}/api/models?token=from-the-env"))["default_provider"] == "fake"
    finally:
        stop(proc)


def test_a_port_in_use_is_one_line(srv, project):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = openheim("serve", "--port", str(port), cwd=project)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: Failed to bind 127.0.0.1:{port}: ")
    assert "--port" in lines[0]


def test_serve_section_sets_host_and_port(srv, project, isolated_home):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = isolated_home / "config.toml"
    config.write_text(
        config.read_text().replace(
            'default_provider = "fake"\n', f'default_provider = "fake"\n[serve]\nport = {port}\n', 1
        )
    )
    proc = spawn("serve", cwd=project)
    try:
        assert f"listening on http://127.0.0.1:{port}/?token=" in proc.stderr.readline()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                assert urllib.request.urlopen(f"http://127.0.0.1:{port}/").status == 200
                break
            except OSError:
                time.sleep(0.05)
    finally:
        stop(proc)
