"""Embedding clients: OpenAI-compatible `/embeddings` and Gemini `batchEmbedContents`.

Requests go through the chat clients' HTTP layer and retry policy (openheim/core/llm/http.py, retry.py):
no ~/.netrc, no redirects, the same User-Agent, and no secret in any message.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from openheim.config.providers import provider_kind
from openheim.config.secrecy import scrub_url
from openheim.core.llm.retry import RetryPolicy
from openheim.core.turn_context import CancelToken
from openheim.errors import ApiError, ConfigError

OPENAI_BATCH = 64
GEMINI_BATCH = 100


class EmbeddingClient(Protocol):
    """Turns texts into vectors, one per text, in input order."""

    model: str

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def batches(texts: list[str], size: int) -> list[list[str]]:
    return [texts[i : i + size] for i in range(0, len(texts), size)]


def _check_count(vectors: list[Any], expected: int) -> None:
    if len(vectors) != expected:
        got = f"{len(vectors)} vector" + ("" if len(vectors) == 1 else "s")
        asked = f"{expected} input" + ("" if expected == 1 else "s")
        raise ApiError(f"embeddings provider returned {got} for {asked}")


def _vector(value: Any) -> list[float]:
    if not isinstance(value, list) or not value:
        raise ApiError("embeddings provider returned no vector")
    try:
        return [float(x) for x in value]
    except (TypeError, ValueError):
        raise ApiError("embeddings provider returned a vector that is not a list of numbers") from None


def openai_request(model: str, texts: list[str]) -> dict:
    """The body of `POST {api_base}/embeddings`."""
    return {"model": model, "input": list(texts), "encoding_format": "float"}


def parse_openai_response(body: Any, expected: int) -> list[list[float]]:
    """`data[].embedding`, ordered by `data[].index`."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ApiError("embeddings provider returned no `data` list")
    _check_count(data, expected)
    items = sorted(data, key=lambda d: d.get("index", 0) if isinstance(d, dict) else 0)
    return [_vector(d.get("embedding") if isinstance(d, dict) else None) for d in items]


def gemini_model_name(model: str) -> str:
    """`models/{model}`, prefixed once."""
    return model if model.startswith("models/") else f"models/{model}"


def gemini_request(model: str, texts: list[str]) -> dict:
    """The body of `POST {api_base}/models/{model}:batchEmbedContents`."""
    name = gemini_model_name(model)
    return {"requests": [{"model": name, "content": {"parts": [{"text": t}]}} for t in texts]}


def parse_gemini_response(body: Any, expected: int) -> list[list[float]]:
    """`embeddings[].values`, in request order."""
    items = body.get("embeddings") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ApiError("embeddings provider returned no `embeddings` list")
    _check_count(items, expected)
    return [_vector(e.get("values") if isinstance(e, dict) else None) for e in items]


class _Transport:
    """POSTs JSON to one provider through the shared HTTP layer (created on first use), with retries."""

    def __init__(self, api_base: str, api_key: str, timeout: float) -> None:
        self.api_base = api_base.rstrip("/")
        self._key = api_key
        self.timeout = timeout
        self._http: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"_Transport(api_base={scrub_url(self.api_base)!r})"

    def post(self, path: str, body: dict, headers: dict[str, str]) -> Any:
        from openheim.core.llm.http import HttpTransport  # requests: with the first embeddings request

        with self._lock:
            if self._http is None:
                self._http = HttpTransport(self.timeout, api_key=self._key, api_base=self.api_base)
            http = self._http
        url = f"{self.api_base}{path}"
        return RetryPolicy().run(lambda: http.post_json(url, body, headers), CancelToken(), "embeddings request")


class OpenAIEmbeddings:
    """`POST {api_base}/embeddings`, Bearer auth only when a key is set."""

    batch_size = OPENAI_BATCH

    def __init__(self, api_base: str, api_key: str, model: str, timeout: float = 120) -> None:
        self.model = model
        self._key = api_key or ""
        self._http = _Transport(api_base, self._key, timeout)

    def __repr__(self) -> str:
        return f"OpenAIEmbeddings(api_base={scrub_url(self._http.api_base)!r}, model={self.model!r})"

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors for ``texts``, in order (one request per 64 texts)."""
        return [v for chunk in batches(list(texts), self.batch_size) for v in self._embed_batch(chunk)]

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        body = self._http.post("/embeddings", openai_request(self.model, texts), headers)
        return parse_openai_response(body, len(texts))


class GeminiEmbeddings:
    """`POST {api_base}/models/{model}:batchEmbedContents` with the key in `x-goog-api-key`."""

    batch_size = GEMINI_BATCH

    def __init__(self, api_base: str, api_key: str, model: str, timeout: float = 120) -> None:
        self.model = model
        self._key = api_key or ""
        self._http = _Transport(api_base, self._key, timeout)

    def __repr__(self) -> str:
        return f"GeminiEmbeddings(api_base={scrub_url(self._http.api_base)!r}, model={self.model!r})"

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors for ``texts``, in order (one request per 100 texts)."""
        return [v for chunk in batches(list(texts), self.batch_size) for v in self._embed_batch(chunk)]

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        headers = {"x-goog-api-key": self._key} if self._key else {}
        path = f"/{gemini_model_name(self.model)}:batchEmbedContents"
        body = self._http.post(path, gemini_request(self.model, texts), headers)
        return parse_gemini_response(body, len(texts))


def embedding_client_for(
    kind: str, api_base: str, api_key: str, model: str, timeout: float = 120, provider_name: str = ""
) -> EmbeddingClient:
    """The embeddings client for a provider kind; Anthropic has none."""
    api = provider_kind(kind).embeddings
    if api is None:
        name = provider_name or kind
        raise ConfigError(
            f"[memory] embedding_provider '{name}' is an {kind.title()} provider, which has no "
            "embeddings API; use an OpenAI-compatible or Gemini provider"
        )
    if not model.strip():
        raise ConfigError("[memory] embedding_model is required when embedding_provider is set")
    cls = GeminiEmbeddings if api == "gemini" else OpenAIEmbeddings
    return cls(api_base, api_key, model, timeout)
