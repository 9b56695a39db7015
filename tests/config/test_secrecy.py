"""Secrecy rules: URL secrets, redaction of messages and log records, scrubbed reprs."""

from __future__ import annotations

import logging

import pytest

from openheim.config.agent_config import AgentConfig
from openheim.config.secrecy import (
    RedactingFilter,
    host_of,
    redact,
    remember_secrets,
    scrub_url,
    shown_url,
    url_secrets,
)
from openheim.memory.embedding import GeminiEmbeddings, OpenAIEmbeddings

URL = "http://user:pw-Secret9@127.0.0.1:1/v1?key=Q-Secret-77&alt=sse#frag-Secret"


def test_url_secrets_are_userinfo_query_and_fragment():
    found = url_secrets(URL)
    for part in ("pw-Secret9", "user:pw-Secret9", "Q-Secret-77", "key=Q-Secret-77&alt=sse", "frag-Secret"):
        assert part in found
    assert "user" not in found and "sse" not in found  # not secrets; redacting them would garble words
    assert url_secrets("https://api.example/v1") == []


def test_host_of_and_shown_url_never_show_userinfo():
    assert host_of(URL) == "127.0.0.1:1"
    assert host_of("https://[::1]:8443/v1") == "[::1]:8443"
    assert scrub_url(URL) == shown_url(URL) == "http://127.0.0.1:1/v1"
    assert shown_url("htp//user:pw@host/v1?key=abc") == "host/v1"


def test_redact_removes_userinfo_and_query_values_from_any_text():
    text = "failed: HTTPConnectionPool: url: /v1?key=abcdef&alt=sse (from http://bob:hunter2@h.example/x)"
    clean = redact(text)
    assert "abcdef" not in clean and "hunter2" not in clean and "bob" not in clean
    assert "?key=<redacted>&alt=<redacted>" in clean and "http://h.example/x" in clean


def test_remembered_secrets_are_redacted_wherever_they_appear():
    remember_secrets("sk-remembered-XYZ", "ab")  # too short to redact safely: ignored
    assert redact("the key sk-remembered-XYZ was rejected") == "the key <redacted> was rejected"
    assert redact("a tab b") == "a tab b"


def test_filter_redacts_messages_arguments_and_tracebacks():
    remember_secrets("sk-in-a-traceback-1")
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "calling %s with %s", ("h?key=zzz9", "ok"), None)
    try:
        raise ValueError("bad key sk-in-a-traceback-1")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    assert RedactingFilter().filter(record)
    formatted = logging.Formatter().format(record)
    assert "zzz9" not in formatted and "sk-in-a-traceback-1" not in formatted
    assert "calling h?key=<redacted> with ok" in formatted and "ValueError" in formatted


def test_agent_config_repr_is_scrubbed():
    cfg = AgentConfig("p", "openai", URL, "sk-repr-secret", "m")
    for text in (repr(cfg), str(cfg)):
        assert "pw-Secret9" not in text and "Q-Secret-77" not in text and "sk-repr-secret" not in text
        assert "http://127.0.0.1:1/v1" in text


@pytest.mark.parametrize("cls", [OpenAIEmbeddings, GeminiEmbeddings])
def test_embeddings_repr_is_scrubbed(cls):
    client = cls(URL, "sk-embed-secret", "embed-m")
    for text in (repr(client), repr(client._http)):
        assert "pw-Secret9" not in text and "Q-Secret-77" not in text and "sk-embed-secret" not in text
    assert "http://127.0.0.1:1/v1" in repr(client)


def test_cli_logging_redacts_and_keeps_urllib3_above_debug():
    import os
    import subprocess
    import sys

    code = (
        "import logging\n"
        "from openheim.cli import setup_logging\n"
        "from openheim.config.secrecy import remember_secrets\n"
        "setup_logging()\n"
        "remember_secrets('sk-LOGGED-1')\n"
        "logging.getLogger('openheim.x').debug('POST /v1?key=abcdef with sk-LOGGED-1')\n"
        "logging.getLogger('urllib3.connectionpool').debug('http://h:1 \"POST /v1?key=abcdef HTTP/1.1\" 200')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OPENHEIM_LOG": "debug"},
    )
    assert "POST /v1?key=<redacted> with <redacted>" in r.stderr
    assert "abcdef" not in r.stderr and "sk-LOGGED-1" not in r.stderr and "HTTP/1.1" not in r.stderr
