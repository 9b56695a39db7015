"""Fakes for the memory tests: a real HTTP embeddings server and an in-process embedder."""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# A tiny thesaurus so "semantic" search finds what keyword search cannot.
SYNONYMS = {"automobile": "car", "vehicle": "car", "feline": "cat", "kitty": "cat", "beverage": "drink"}


def fake_vector(text: str, dims: int) -> list[float]:
    """A deterministic bag-of-words vector: each (synonym-folded) word bumps one hashed dimension."""
    vector = [0.01] * dims
    for word in re.findall(r"\w+", text.lower()):
        word = SYNONYMS.get(word, word)
        slot = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little") % dims
        vector[slot] += 1.0
    return vector


class FakeEmbedder:
    """An in-process EmbeddingClient (for tests that do not need the wire)."""

    def __init__(self, model: str = "fake-embed", dims: int = 64) -> None:
        self.model, self.dims, self.calls = model, dims, []
        self.fail = False

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.fail:
            from openheim.errors import TransportError

            raise TransportError("connection refused")
        return [fake_vector(t, self.dims) for t in texts]


class EmbeddingsServer:
    """OpenAI `/v1/embeddings` and Gemini `/v1beta/models/{m}:batchEmbedContents` on 127.0.0.1:0."""

    def __init__(self, dims: int = 64) -> None:
        self.dims = dims
        self.down = False  # answer 503 to everything
        self.refuse: set[str] = set()  # any input containing one of these gets a 400
        self.short = False  # answer one vector fewer than asked for
        self.requests: list[dict] = []  # {"path", "headers", "body"}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> EmbeddingsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def inputs(self) -> list[str]:
        """Every text sent so far, in order."""
        texts: list[str] = []
        for r in self.requests:
            body = r["body"]
            texts += body["input"] if "input" in body else [q["content"]["parts"][0]["text"] for q in body["requests"]]
        return texts

    def answer(self, path: str, headers: dict, body: dict) -> tuple[int, dict]:
        with self._lock:
            self.requests.append({"path": path, "headers": headers, "body": body})
        if self.down:
            return 503, {"error": {"message": "overloaded"}}
        if path.endswith("/embeddings"):
            return self._openai(body)
        if path.endswith(":batchEmbedContents"):
            return self._gemini(path, body)
        return 404, {"error": {"message": "no such route"}}

    def _refused(self, texts: list[str]) -> bool:
        return any(word in t for t in texts for word in self.refuse)

    def _openai(self, body: dict) -> tuple[int, dict]:
        texts = body["input"]
        if self._refused(texts):
            return 400, {"error": {"message": "input rejected by content policy"}}
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(t, self.dims)}
            for i, t in enumerate(texts[1:] if self.short else texts)
        ]
        random.Random(len(texts)).shuffle(data)  # clients must sort by index
        return 200, {"object": "list", "data": data, "model": body["model"]}

    def _gemini(self, path: str, body: dict) -> tuple[int, dict]:
        texts = [r["content"]["parts"][0]["text"] for r in body["requests"]]
        if len(texts) > 100:
            return 400, {"error": {"message": "at most 100 requests can be in one batch"}}
        if self._refused(texts):
            return 400, {"error": {"message": "input rejected"}}
        return 200, {"embeddings": [{"values": fake_vector(t, self.dims)} for t in texts]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, reply = fake.answer(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
