"""The small things a new user met, each fixed: doctor after init, memory search's keyword hits, serve's banner,
retry warnings without logger names, an unresolvable host not retried, a body-less subagent profile."""

from __future__ import annotations

import subprocess
import sys

import pytest
import requests
from cli_helpers import ROOT, openheim, spawn, write_config
from fake_llm import FakeLLMServer, Fault, Reply

from openheim.core.llm.http_errors import transport_error
from openheim.core.llm.retry import is_retryable
from openheim.errors import TransportError


def test_doctor_after_init_does_not_warn_about_unused_providers(isolated_home):
    assert openheim("init").returncode == 0
    r = openheim("doctor", "--offline", env={"OPENAI_API_KEY": "sk-test"})
    providers = [line for line in r.stdout.splitlines() if "provider " in line]
    assert len(providers) == 3 and sum(line.startswith("ok    provider openai (default)") for line in providers) == 1
    others = [line for line in providers if "(default)" not in line]
    assert len(others) == 2 and all(line.startswith("--    ") and line.endswith("to use it") for line in others)
    assert not [line for line in r.stdout.splitlines() if line.startswith("warn  provider")]


def test_memory_search_shows_keyword_matches_not_a_zero_rank(isolated_home):
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        for note in ("deploys are on Tuesdays", "the editor is vim", "deploys need a review"):
            assert openheim("memory", "add", note).returncode == 0
        r = openheim("memory", "search", "deploys")
    assert "(keyword match #1)" in r.stdout and "(keyword match #2)" in r.stdout
    assert "rank 0.00" not in r.stdout


@pytest.mark.parametrize("args", [(), ("--no-token",)])
def test_serve_banner_reads_plainly(isolated_home, tmp_path, args):
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        proc = spawn("serve", "--port", "0", *args, cwd=tmp_path)
        try:
            line = proc.stderr.readline()
        finally:
            proc.terminate()
            proc.communicate(timeout=10)
    assert line.startswith("openheim serve: listening on ") and "((" not in line and "))" not in line


def test_retry_warning_has_no_logger_name(isolated_home, tmp_path):
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        srv.enqueue(Fault(status=503, retry_after=0), Reply(text="fine"))
        r = openheim("run", "hi", cwd=tmp_path, env={"OPENHEIM_RETRY_BASE_DELAY": "0"})
    assert r.returncode == 0 and r.stdout == "fine\n"
    (line,) = [x for x in r.stderr.splitlines() if "attempt 1/" in x]
    assert line.startswith("openheim: LLM request failed (attempt 1/") and "openheim.core" not in line
    debug = openheim("--version", env={"OPENHEIM_LOG": "debug"})  # debug logs keep module names
    assert debug.returncode == 0


def test_an_unresolvable_host_is_not_retried():
    dns = requests.ConnectionError("HTTPSConnectionPool(host='nope.invalid'): NameResolutionError(...)")
    error = transport_error(dns, "https://nope.invalid/v1/chat", 5)
    assert str(error) == "Request error: could not resolve nope.invalid; check api_base and the network"
    assert not is_retryable(error)
    refused = transport_error(
        requests.ConnectionError("NewConnectionError: [Errno 111] refused"), "http://127.0.0.1:9/v1", 5
    )
    assert is_retryable(refused) and is_retryable(TransportError("reset"))


def test_an_unresolvable_host_fails_at_once_through_run(isolated_home, tmp_path):
    """A host name that does not resolve (the reserved .invalid TLD; the lookup is faked, so no DNS query leaves
    the machine): one attempt, no retry warnings."""
    write_config(isolated_home, "https://openheim-test.invalid/v1")
    code = (
        "import socket, sys, runpy\n"
        "def fail(*a, **k):\n    raise socket.gaierror(-2, 'Name or service not known')\n"
        "socket.getaddrinfo = fail\n"  # no DNS query leaves the machine
        "sys.argv = ['openheim', 'run', 'hi']\nrunpy.run_module('openheim', run_name='__main__')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "OPENHEIM_HOME": str(isolated_home),
            "PYTHONPATH": str(ROOT),
        },
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 1
    assert "could not resolve openheim-test.invalid" in r.stderr and "attempt" not in r.stderr
