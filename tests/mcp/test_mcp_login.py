"""MCP sign-in over SSH: `openheim mcp login NAME` against a local OAuth-protected MCP server (the SDK's
server-side auth), finished by pasting the redirected address; tokens stored 0600, refreshed, never shown;
`openheim mcp` and `doctor` say "needs login"; a turn says so in one line; `mcp logout` forgets it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests
from cli_helpers import openheim, spawn, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

pytest.importorskip("mcp")

SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_oauth_server.py"


@pytest.fixture
def guarded():
    """The OAuth-protected server. Its access tokens live 5 s, and openheim refreshes any token that expires
    within 30 s, so every later connection refreshes."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--token-lifetime", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    port = int(proc.stdout.readline().split()[1])
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    yield f"http://127.0.0.1:{port}/mcp", lines
    proc.kill()
    proc.wait()


def test_login_with_a_pasted_redirect_then_refresh_and_logout(guarded, isolated_home, tmp_path):
    url, server_lines = guarded
    with FakeLLMServer(wire="openai") as llm:
        write_config(isolated_home, llm.base_url, extra=f'[mcp_servers.guarded]\nurl = "{url}"\n')
        llm.enqueue(Reply(text="no tools"))
        # before the login, side by side (each start-up imports the MCP SDK): `mcp`, `doctor`, a turn
        status_proc = spawn("mcp", "--json", "--timeout", "20", cwd=tmp_path)
        doctor_proc = spawn("doctor", "--timeout", "20", cwd=tmp_path)
        run = openheim("run", "who am I", cwd=tmp_path)
        before = next(s for s in json.loads(status_proc.communicate(timeout=60)[0])["servers"])
        doctor_out = doctor_proc.communicate(timeout=60)[0]
        assert before["state"] == "needs login" and not before["connected"]
        assert "needs login: run `openheim mcp login guarded`" in before["error"]
        assert "guarded needs login" in doctor_out
        assert run.returncode == 0, run.stderr
        notes = [
            line
            for line in run.stderr.splitlines()  # beside the one-line wait notice
            if "guarded" in line and "starting MCP servers" not in line
        ]
        assert len(notes) == 1 and "needs login: run `openheim mcp login guarded`" in notes[0], run.stderr

        proc = subprocess.Popen(
            [sys.executable, "-m", "openheim", "mcp", "login", "guarded"],
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        printed = []
        for line in proc.stdout:
            printed.append(line)
            if "paste here" in line:
                break
        address = re.search(r"(http://\S+/authorize\?\S+)", "".join(printed)).group(1)
        redirect = requests.get(address, allow_redirects=False, timeout=10).headers["location"]
        assert "/callback?code=" in redirect  # the address a browser on another machine could not open
        out, err = proc.communicate(redirect + "\n", timeout=60)
        assert proc.returncode == 0, err
        assert "Signed in to 'guarded' (1 tools)" in out
        token_file = isolated_home / "mcp-auth" / "guarded.json"
        assert token_file.stat().st_mode & 0o777 == 0o600
        access = json.loads(token_file.read_text())["tokens"]["access_token"]
        assert access.startswith("at-") and access not in out + err + "".join(printed)

        # a turn uses the server: the token is about to expire, so it is refreshed first (and saved)
        llm.enqueue(Reply(tool_calls=[ToolCall("guarded__whoami", {})]), Reply(text="ok"))
        r = openheim("run", "who am I", cwd=tmp_path, env={"OPENHEIM_LOG": "debug"})
        assert r.returncode == 0, r.stderr
        assert llm.requests[2].body["messages"][-1]["content"] == "signed in"
        assert any("REFRESHED" in line for line in server_lines)
        tokens = json.loads(token_file.read_text())["tokens"]
        assert tokens["access_token"] != access
        for secret in (access, tokens["access_token"], tokens["refresh_token"]):  # never logged, even at debug
            assert secret not in r.stderr + r.stdout
        assert "needs login" not in r.stderr

        r = openheim("mcp", "logout", "guarded", cwd=tmp_path)
        assert r.returncode == 0 and "Signed out of 'guarded'" in r.stdout and not token_file.exists()
        assert "had no sign-in" in openheim("mcp", "logout", "guarded", cwd=tmp_path).stdout


def test_login_errors_are_one_line(guarded, isolated_home, tmp_path):
    url, _ = guarded
    with FakeLLMServer(wire="openai") as llm:
        write_config(
            isolated_home,
            llm.base_url,
            extra=f'[mcp_servers.guarded]\nurl = "{url}"\n[mcp_servers.local]\ncommand = "true"\n',
        )
        r = openheim("mcp", "login", "nope", cwd=tmp_path)
        assert r.returncode == 2 and "no MCP server named 'nope' (configured: guarded, local)" in r.stderr
        r = openheim("mcp", "login", "local", cwd=tmp_path)
        assert r.returncode == 2 and "only HTTP servers sign in" in r.stderr
        r = openheim(
            "mcp", "login", "guarded", "--timeout", "5", input="https://example.invalid/nothing\n", cwd=tmp_path
        )
        assert r.returncode == 1
        assert (
            r.stderr.strip()
            .splitlines()[-1]
            .startswith("Error: signing in to 'guarded' failed: that is not the address the browser was sent to")
        )
        assert not (isolated_home / "mcp-auth" / "guarded.json").exists()
        # a project's .mcp.json server signs in once the file is trusted
        (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": {"type": "http", "url": url}}}))
        r = openheim("mcp", "login", "proj", cwd=tmp_path)
        assert r.returncode == 2 and "no MCP server named 'proj'" in r.stderr
        assert openheim("mcp", "trust", cwd=tmp_path).returncode == 0
        r = openheim("mcp", "login", "proj", "--timeout", "5", input="nothing\n", cwd=tmp_path)
        assert r.returncode == 1 and "signing in to 'proj' failed" in r.stderr and "/authorize?" in r.stdout


def _env() -> dict:
    import os

    from cli_helpers import ROOT

    return {**os.environ, "PYTHONPATH": str(ROOT)}
