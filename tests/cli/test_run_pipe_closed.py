"""`seq 1 20000 | openheim run 2>err | head -1`: exit 141 (README's exit codes) and nothing at all on stderr.

A closed stdout cancels the turn; that cancel shuts the stream down mid-payload. The payload it cut is ours,
not the provider's: it is never reported as "not valid JSON", and nothing else is printed once stdout is gone.
Repeated, since the cut lands at a different place each time.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cli_helpers import ROOT, write_config
from fake_llm import FakeLLMServer

from openheim.core.cancel import CancelToken
from openheim.core.llm.http import HttpTransport
from openheim.core.llm.openai import ChatStreamParser
from openheim.core.llm.reply import read_reply
from openheim.errors import Cancelled


def _event(i: int) -> bytes:
    delta = {"content": f"{i}\n"}
    payload = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake-model"}
    payload["choices"] = [{"index": 0, "delta": delta, "finish_reason": None}]
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


@contextmanager
def streaming_until_close(events: int = 20000, pace: float = 0.0) -> Iterator[str]:
    """An OpenAI-compatible server whose stream has no length and ends when it closes (many servers do)."""
    body = [_event(i) for i in range(events)]
    listener = socket.create_server(("127.0.0.1", 0))

    def answer(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536) or b"\r\n\r\n"
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
                for event in body:
                    conn.sendall(event)
                    if pace:
                        time.sleep(pace)
                conn.sendall(b"data: [DONE]\n\n")
            except OSError:
                pass

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        listener.close()


def _pipe_closed_early(home: Path, cwd: Path, *options: str) -> tuple[str, str]:
    """The exit code of `openheim run` in ``seq 1 20000 | openheim run 2>err | head -1``, and err's text."""
    err = cwd / "err"
    command = f'seq 1 20000 | "{sys.executable}" -m openheim run {" ".join(options)} 2>"{err}" | head -1 >/dev/null'
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        ["bash", "-c", command + "; echo ${PIPESTATUS[1]}"], env=env, cwd=cwd, capture_output=True, text=True
    )
    return r.stdout.strip(), err.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("options,times", [((), 12), (("-o", "stream-json"), 8)])
def test_a_stream_ending_at_close_cut_by_head_leaves_stderr_empty(options, times, isolated_home, tmp_path):
    with streaming_until_close() as url:
        write_config(isolated_home, url)
        for _ in range(times):
            code, err = _pipe_closed_early(isolated_home, tmp_path, *options)
            assert (code, err) == ("141", "")


@pytest.mark.slow
def test_a_chunked_stream_cut_by_head_leaves_stderr_empty(isolated_home, tmp_path):
    with FakeLLMServer(wire="openai") as srv:  # echoes the 20000 lines back, a word per event
        write_config(isolated_home, srv.base_url)
        for _ in range(6):
            code, err = _pipe_closed_early(isolated_home, tmp_path)
            assert (code, err) == ("141", "")


def test_a_payload_our_cancel_cut_is_not_called_invalid(caplog):
    """Any front end's cancel (Ctrl-C, session/cancel, a closed pipe) cuts the stream the same way."""
    token = CancelToken()
    with streaming_until_close() as url, HttpTransport(5).stream(url + "/chat/completions", {}, {}, token) as resp:
        with pytest.raises(Cancelled):
            read_reply(resp, ChatStreamParser(), lambda chunk: token.cancel(), url)
    assert "not valid JSON" not in caplog.text
