"""The embeddings clients use the chat clients' HTTP policy: no ~/.netrc, no redirects (so no key follows
one), the same User-Agent and retry policy, and no secret in any message."""

from __future__ import annotations

import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from memory_fakes import EmbeddingsServer

from openheim.errors import HttpError, TransportError
from openheim.memory.embedding import GeminiEmbeddings, OpenAIEmbeddings


class Recorder:
    """A loopback server that records requests and answers each with ``answer(path) -> (status, headers, body)``."""

    def __init__(self, answer) -> None:
        self.requests: list[dict] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                recorder.requests.append(
                    {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}
                )
                status, headers, body = answer(self.path)
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(body)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def no_waits(monkeypatch):
    monkeypatch.setenv("OPENHEIM_RETRY_BASE_DELAY", "0")


def test_netrc_is_never_read(isolated_home):
    home = isolated_home.parent
    (home / ".netrc").write_text("machine 127.0.0.1 login netrc-user password netrc-PASSWORD\n")
    (home / ".netrc").chmod(0o600)
    with EmbeddingsServer() as server:
        OpenAIEmbeddings(server.url + "/v1", "", "embed").embed(["x"])  # a keyless local server
        headers = server.requests[0]["headers"]
    assert "authorization" not in headers
    assert headers["user-agent"] == "openheim"


def test_user_info_in_api_base_is_never_sent():
    with EmbeddingsServer() as server:
        url = server.url.replace("http://", "http://url-user:url-PASSWORD@") + "/v1"
        OpenAIEmbeddings(url, "", "embed").embed(["x"])
        assert "authorization" not in server.requests[0]["headers"]


@pytest.mark.parametrize(
    "cls,base,key_header",
    [
        (GeminiEmbeddings, "/v1beta", "x-goog-api-key"),
        (OpenAIEmbeddings, "/v1", "authorization"),
    ],
)
def test_a_redirect_is_refused_and_the_key_goes_nowhere_else(cls, base, key_header):
    elsewhere = Recorder(lambda p: (200, {}, b"{}"))
    origin = Recorder(lambda p: (307, {"Location": elsewhere.url + p}, b""))
    try:
        with pytest.raises(HttpError) as info:
            cls(origin.url + base, "key-REDIRECT-1", "e").embed(["x"])
    finally:
        origin.close()
        elsewhere.close()
    assert info.value.status == 307 and "redirect" in str(info.value) and "api_base" in str(info.value)
    assert len(origin.requests) == 1 and key_header in origin.requests[0]["headers"]
    assert elsewhere.requests == []


def test_embeddings_retry_transient_failures_like_chat():
    replies = [
        (503, {}, b'{"error":{"message":"overloaded"}}'),
        (200, {}, json.dumps({"data": [{"index": 0, "embedding": [1.0, 0.0]}]}).encode()),
    ]
    server = Recorder(lambda p: replies.pop(0))
    try:
        assert OpenAIEmbeddings(server.url + "/v1", "k-1234", "e").embed(["x"]) == [[1.0, 0.0]]
    finally:
        server.close()
    assert len(server.requests) == 2


def test_url_credentials_never_appear_in_errors_or_logs(caplog):
    caplog.set_level(logging.DEBUG)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://emb-user:emb-PASSWORD@127.0.0.1:{port}/v1?key=emb-QUERY-KEY"
    client = OpenAIEmbeddings(base, "sk-emb-KEY-9", "e", timeout=2)
    with pytest.raises(TransportError) as info:
        client.embed(["x"])
    shown = str(info.value) + caplog.text + repr(client)
    assert "could not connect to 127.0.0.1" in str(info.value)
    for secret in ("emb-user", "emb-PASSWORD", "emb-QUERY-KEY", "sk-emb-KEY-9"):
        assert secret not in shown
