"""MCP sign-in finished by the browser itself: `openheim mcp login NAME` catches the authorization server's
redirect on its loopback port (an HTTP GET of /callback?code=...&state=..., as a browser makes it), against
the local OAuth-protected MCP server; a refused sign-in and a stray request are told apart."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests
from cli_helpers import spawn, write_config
from fake_llm import FakeLLMServer

pytest.importorskip("mcp")

SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_oauth_server.py"


@pytest.fixture
def guarded(isolated_home):
    proc = subprocess.Popen([sys.executable, str(SERVER)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(proc.stdout.readline().split()[1])
    threading.Thread(target=lambda: list(proc.stdout), daemon=True).start()
    with FakeLLMServer(wire="openai") as llm:
        write_config(isolated_home, llm.base_url, extra=f'[mcp_servers.guarded]\nurl = "http://127.0.0.1:{port}/mcp"\n')
        yield
    proc.kill()
    proc.wait()


def _start_login(cwd: Path) -> tuple[subprocess.Popen, str, str]:
    """`openheim mcp login guarded` with nothing to paste; (process, authorization address, catcher address)."""
    proc = spawn("mcp", "login", "guarded", "--timeout", "60", cwd=cwd)
    printed = []
    for line in proc.stdout:
        printed.append(line)
        if "paste here" in line:
            break
    text = "".join(printed)
    address = re.search(r"(http://\S+/authorize\?\S+)", text).group(1)
    catcher = re.search(r"return to (http://127\.0\.0\.1:\d+/callback)", text).group(1)
    return proc, address, catcher


def test_the_browser_redirect_to_the_loopback_port_signs_in(guarded, isolated_home, tmp_path):
    proc, address, catcher = _start_login(tmp_path)
    stray = requests.get(catcher, timeout=10)  # a reload or a probe of the address: not the redirect
    assert stray.status_code == 400 and "waits for the sign-in" in stray.text
    redirect = requests.get(address, allow_redirects=False, timeout=10).headers["location"]
    assert redirect.startswith(catcher + "?code=")
    page = requests.get(redirect, timeout=10)  # the browser follows the redirect to the loopback catcher
    assert page.status_code == 200 and "Signed in." in page.text
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Signed in to 'guarded' (1 tools)" in out
    token_file = isolated_home / "mcp-auth" / "guarded.json"
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert json.loads(token_file.read_text())["tokens"]["access_token"].startswith("at-")


def test_a_refused_sign_in_reaches_the_terminal_in_one_line(guarded, isolated_home, tmp_path):
    proc, _, catcher = _start_login(tmp_path)
    page = requests.get(catcher + "?error=access_denied&error_description=the+user+said+no&state=x", timeout=10)
    assert page.status_code == 400 and "Sign-in failed: the server refused the sign-in: the user said no" in page.text
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert err.strip().splitlines()[-1] == (
        "Error: signing in to 'guarded' failed: the server refused the sign-in: the user said no"
    )
    assert not (isolated_home / "mcp-auth" / "guarded.json").exists()
