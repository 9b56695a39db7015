"""LongTermMemory and the embedding clients against a real fake embeddings server on 127.0.0.1."""

from __future__ import annotations

import logging
import sqlite3

import pytest
from memory_fakes import EmbeddingsServer, FakeEmbedder, fake_vector

from openheim.errors import (
    ApiError,
    ConfigError,
    DatabaseError,
    HttpError,
    TransportError,
)
from openheim.memory import sqlite as rag_sqlite
from openheim.memory.embedding import (
    GeminiEmbeddings,
    OpenAIEmbeddings,
    embedding_client_for,
    gemini_request,
    parse_gemini_response,
    parse_openai_response,
)
from openheim.memory.long_term import LongTermMemory
from openheim.memory.store import VectorStore


@pytest.fixture(autouse=True)
def no_retry_waits(monkeypatch):
    """Embedding requests retry like chat ones; these tests do not wait for the backoff."""
    monkeypatch.setenv("OPENHEIM_RETRY_BASE_DELAY", "0")


@pytest.fixture
def server():
    with EmbeddingsServer() as s:
        yield s


def openai(server: EmbeddingsServer, model: str = "embed-a", key: str = "sk-test") -> OpenAIEmbeddings:
    return OpenAIEmbeddings(server.url + "/v1", key, model, timeout=5)


def gemini(server: EmbeddingsServer, model: str = "embed-g", key: str = "g-key") -> GeminiEmbeddings:
    return GeminiEmbeddings(server.url + "/v1beta", key, model, timeout=5)


@pytest.fixture
def db(tmp_path):
    return tmp_path / "mem" / "memory.db"


def seed(db, texts):
    """Notes written without vectors, as an outage would leave them."""
    db.parent.mkdir(parents=True, exist_ok=True)
    store = VectorStore(db)
    ids = store.insert_many((t, None) for t in texts)
    store.close()
    return ids


# --- embedding clients -----------------------------------------------------------------------


def test_openai_client_wire_shape(server):
    vectors = openai(server).embed(["alpha", "beta gamma"])
    assert vectors == [fake_vector("alpha", 64), fake_vector("beta gamma", 64)]  # sorted by index
    req = server.requests[0]
    assert req["path"] == "/v1/embeddings"
    assert req["body"] == {"model": "embed-a", "input": ["alpha", "beta gamma"], "encoding_format": "float"}
    assert req["headers"]["authorization"] == "Bearer sk-test"


def test_openai_client_sends_no_auth_without_a_key(server):
    openai(server, key="").embed(["x"])
    assert "authorization" not in server.requests[0]["headers"]


def test_openai_client_batches_by_64(server):
    texts = [f"text {i}" for i in range(130)]
    vectors = openai(server).embed(texts)
    assert [len(r["body"]["input"]) for r in server.requests] == [64, 64, 2]
    assert vectors[100] == fake_vector("text 100", 64)


def test_gemini_client_wire_shape_and_batches(server):
    texts = [f"t{i}" for i in range(150)]
    vectors = gemini(server).embed(texts)
    assert vectors[149] == fake_vector("t149", 64)
    assert [r["path"] for r in server.requests] == ["/v1beta/models/embed-g:batchEmbedContents"] * 2
    assert [len(r["body"]["requests"]) for r in server.requests] == [100, 50]
    first = server.requests[0]
    assert first["headers"]["x-goog-api-key"] == "g-key" and "authorization" not in first["headers"]
    assert first["body"]["requests"][0] == {"model": "models/embed-g", "content": {"parts": [{"text": "t0"}]}}


def test_gemini_model_prefix_is_added_once():
    assert gemini_request("models/x", ["a"])["requests"][0]["model"] == "models/x"


def test_gemini_client_with_prefixed_model(server):
    gemini(server, model="models/embed-g").embed(["a"])
    assert server.requests[0]["path"] == "/v1beta/models/embed-g:batchEmbedContents"


def test_http_errors_are_typed(server):
    server.down = True
    with pytest.raises(HttpError) as e:
        openai(server).embed(["x"])
    assert e.value.status == 503 and "overloaded" in e.value.body


def test_transport_errors_are_typed():
    port = _closed_port()
    with pytest.raises(TransportError):
        OpenAIEmbeddings(f"http://127.0.0.1:{port}", "", "m", timeout=2).embed(["x"])


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_response_parsing_errors():
    with pytest.raises(ApiError, match="embeddings provider returned 1 vector for 2 inputs"):
        parse_openai_response({"data": [{"index": 0, "embedding": [1.0]}]}, 2)
    with pytest.raises(ApiError, match="embeddings provider returned no vector"):
        parse_openai_response({"data": [{"index": 0}]}, 1)
    with pytest.raises(ApiError, match="embeddings provider returned no vector"):
        parse_gemini_response({"embeddings": [{"values": []}]}, 1)
    with pytest.raises(ApiError, match="returned 2 vectors for 1 input$"):
        parse_gemini_response({"embeddings": [{"values": [1]}, {"values": [2]}]}, 1)
    out = parse_openai_response({"data": [{"index": 1, "embedding": [2]}, {"index": 0, "embedding": [1]}]}, 2)
    assert out == [[1.0], [2.0]]


def test_client_factory_by_kind():
    with pytest.raises(ConfigError) as e:
        embedding_client_for("anthropic", "https://api.anthropic.com", "k", "m", provider_name="claude")
    assert str(e.value) == (
        "Config error: [memory] embedding_provider 'claude' is an Anthropic provider, which has "
        "no embeddings API; use an OpenAI-compatible or Gemini provider"
    )
    assert isinstance(embedding_client_for("gemini", "http://x", "k", "m"), GeminiEmbeddings)
    for kind in ("openai", "openai_compatible"):
        assert isinstance(embedding_client_for(kind, "http://x", "", "m"), OpenAIEmbeddings)
    assert embedding_client_for("openai", "http://x", "", "m").model == "m"


# --- LongTermMemory --------------------------------------------------------------------------


def test_construction_touches_nothing(db):
    ltm = LongTermMemory(db, FakeEmbedder())
    from openheim.memory.tools import memory_tools

    memory_tools(ltm)
    assert not db.parent.exists()
    assert ltm._store is None


def test_semantic_search_over_http(db, server):
    ltm = LongTermMemory(db, openai(server))
    car = ltm.remember("my car is a red hatchback")
    ltm.remember("the cat sleeps on the sofa")
    result = ltm.search_detailed("automobile colour")
    assert result.mode == "semantic" and "embed-a" in result.reason
    assert result.hits[0].id == car and result.hits[0].kind == "similarity"
    assert ltm.search_detailed("automobile", 1).hits[0].id == car
    assert ltm.stats().embedded == 2
    ltm.close()


def test_semantic_search_with_gemini(db, server):
    ltm = LongTermMemory(db, gemini(server))
    cat = ltm.remember("our cat Miso")
    ltm.remember("deploys happen on Tuesdays")
    result = ltm.search_detailed("feline")
    assert result.mode == "semantic" and result.hits[0].id == cat
    assert ltm.search_detailed("feline").hits[0].score > ltm.search_detailed("feline").hits[1].score
    assert ltm.stats().model == "embed-g"
    ltm.close()


def test_keyword_search_without_an_embedder(db):
    ltm = LongTermMemory(db)
    a = ltm.remember("deploys happen on Tuesdays")
    result = ltm.search_detailed("tuesdays")
    assert result.mode == "keyword" and "no embedding provider" in result.reason
    assert [h.id for h in result.hits] == [a]
    assert ltm.search_detailed("automobile").hits == []
    ltm.close()


def test_blank_query_or_zero_k_makes_no_call(db, server):
    ltm = LongTermMemory(db, openai(server))
    assert ltm.search_detailed("   ").mode == "none"
    assert ltm.search("x", 0) == []
    assert server.requests == []


def test_outage_then_backfill(db, server):
    ltm = LongTermMemory(db, openai(server))
    server.down = True
    ids = [ltm.remember(f"note about topic {i}") for i in range(3)]
    assert ltm.stats().embedded == 0  # stored anyway
    result = ltm.search_detailed("topic")
    assert result.mode == "keyword" and "embedding the query failed" in result.reason
    assert len(result.hits) == 3
    server.down = False
    result = ltm.search_detailed("topic 1")
    assert ltm.stats().embedded == 3
    assert result.mode == "semantic" and result.hits[0].id == ids[1]
    ltm.close()


def test_backfill_is_capped_at_256_per_call_in_batches_of_64(db, server):
    seed(db, [f"old note {i}" for i in range(300)])
    ltm = LongTermMemory(db, openai(server))
    ltm.search("old")
    sizes = [len(r["body"]["input"]) for r in server.requests]
    assert sizes == [1, 64, 64, 64, 64]
    assert ltm.stats().embedded == 256
    ltm.remember("fresh note")
    assert ltm.stats().embedded == 301
    assert ltm.stats().memories == 301


def test_pending_notes_are_searched_by_keyword_first(db, server):
    ltm = LongTermMemory(db, openai(server))
    ltm.remember("the blue whale is the largest animal")
    server.down = True
    pending = ltm.remember("whale songs travel far")
    ltm._backfill = lambda store: 0  # keep the note pending for this search
    server.down = False
    result = ltm.search_detailed("whale")
    assert result.mode == "hybrid" and "without a vector" in result.reason
    assert result.hits[0].id == pending and result.hits[0].kind == "rank"
    assert result.hits[1].kind == "similarity"
    assert len({h.id for h in result.hits}) == len(result.hits)


def test_a_refused_note_is_skipped_until_restart(db, server):
    ids = seed(db, [f"note {i}" for i in range(9)] + ["this one is FORBIDDEN"])
    server.refuse = {"FORBIDDEN"}
    ltm = LongTermMemory(db, openai(server))
    ltm.search("note")
    assert ltm.stats().embedded == 9
    assert ltm._refused == {ids[-1]}
    asked = len(server.inputs())
    ltm.search("note")
    assert "this one is FORBIDDEN" not in server.inputs()[asked:]  # not retried
    assert ltm.search_detailed("forbidden").hits[0].id == ids[-1]  # still found by keyword
    restarted = LongTermMemory(db, openai(server))
    asked = len(server.inputs())
    restarted.search("note")
    assert "this one is FORBIDDEN" in server.inputs()[asked:]  # tried again after a restart


def test_remember_of_a_refused_text_stores_it_without_vector(db, server):
    server.refuse = {"FORBIDDEN"}
    ltm = LongTermMemory(db, openai(server))
    a = ltm.remember("FORBIDDEN words")
    assert ltm.get(a).content == "FORBIDDEN words" and ltm.stats().embedded == 0


def test_model_change_reembeds_from_text(db, server):
    first = LongTermMemory(db, openai(server, model="embed-a"))
    for text in ("alpha note", "beta note", "gamma note"):
        first.remember(text)
    first.close()
    server.requests.clear()
    second = LongTermMemory(db, openai(server, model="embed-b"))
    result = second.search_detailed("beta")
    s = second.stats()
    assert (s.model, s.embedded) == ("embed-b", 3)
    assert {"alpha note", "beta note", "gamma note"} <= set(server.inputs())
    assert all(r["body"]["model"] == "embed-b" for r in server.requests)
    assert result.hits[0].content == "beta note"


def test_dimension_change_reembeds(db, server):
    ltm = LongTermMemory(db, openai(server))
    ltm.remember("alpha")
    ltm.remember("beta")
    assert ltm.stats().dimensions == 64
    server.dims = 32
    hits = ltm.search("alpha")
    s = ltm.stats()
    assert (s.dimensions, s.embedded) == (32, 2)
    assert hits[0].content == "alpha"


def test_edit_and_forget(db, server):
    ltm = LongTermMemory(db, openai(server))
    a = ltm.remember("the office is in Berlin")
    assert ltm.edit(a, "the office moved to Lisbon")
    assert ltm.get(a).content == "the office moved to Lisbon"
    assert ltm.search("Lisbon", 1)[0].id == a
    assert ltm.edit(999, "x") is False
    assert ltm.forget(a) is True and ltm.forget(a) is False
    assert ltm.stats().memories == 0 and ltm.stats().embedded == 0


def test_edit_during_an_outage_drops_the_stale_vector(db, server):
    ltm = LongTermMemory(db, openai(server))
    a = ltm.remember("old text")
    server.down = True
    ltm.edit(a, "new text")
    assert ltm.stats().embedded == 0
    server.down = False
    ltm.search("new")
    assert ltm.stats().embedded == 1


def test_reembed_reports_progress_and_refusals(db, server):
    seed(db, [f"note {i}" for i in range(130)] + ["FORBIDDEN"])
    server.refuse = {"FORBIDDEN"}
    ltm = LongTermMemory(db, openai(server))
    seen = []
    result = ltm.reembed(lambda done, total: seen.append((done, total)))
    assert result.embedded == 130 and result.skipped == [131]
    assert seen[-1] == (131, 131) and len(seen) == 3
    assert ltm.stats().embedded == 130


def test_reembed_needs_an_embedder(db):
    with pytest.raises(ConfigError, match="no embedding provider is configured"):
        LongTermMemory(db).reembed()


def test_reembed_raises_on_outage(db, server):
    seed(db, ["a"])
    server.down = True
    with pytest.raises(HttpError):
        LongTermMemory(db, openai(server)).reembed()


def test_top_k_zero_falls_back_to_default(db):
    assert LongTermMemory(db, top_k=0).top_k == 5


# --- FTS-only fallback -----------------------------------------------------------------------


@pytest.fixture
def no_vectors(monkeypatch):
    driver = rag_sqlite.Driver(sqlite3, "sqlite3", False, "this Python's sqlite3 module cannot load extensions")
    monkeypatch.setattr(rag_sqlite, "_driver", driver)
    monkeypatch.setattr(rag_sqlite, "_noticed", False)
    return driver


def test_fts_only_fallback_when_vectors_are_unavailable(db, server, no_vectors, caplog):
    caplog.set_level(logging.WARNING)
    ltm = LongTermMemory(db, openai(server))
    a = ltm.remember("the wifi password is on the fridge")
    result = ltm.search_detailed("wifi")
    assert result.mode == "keyword" and "cannot load extensions" in result.reason
    assert [h.id for h in result.hits] == [a]
    assert server.requests == []  # no point embedding
    other = LongTermMemory(db.parent / "other.db", openai(server))
    other.remember("x")
    notices = [r for r in caplog.records if "semantic search is off" in r.getMessage()]
    assert len(notices) == 1 and "cannot load extensions" in notices[0].getMessage()
    with pytest.raises(DatabaseError, match="vector search is unavailable"):
        ltm.reembed()


def test_no_notice_without_embeddings(db, no_vectors, caplog):
    caplog.set_level(logging.WARNING)
    ltm = LongTermMemory(db)
    ltm.remember("x")
    assert ltm.search("x")
    assert not [r for r in caplog.records if "semantic search is off" in r.getMessage()]


def test_memory_modules_import_lightly(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "from openheim.memory.long_term import LongTermMemory\n"
        "from openheim.memory.tools import memory_tools\n"
        "import openheim.memory.embedding, openheim.memory.sqlite\n"
        "memory_tools(LongTermMemory(sys.argv[1]))\n"
        "print(sorted(m for m in ('requests', 'sqlite_vec', 'sqlite3', 'pysqlite3') if m in sys.modules))\n"
    )
    db = tmp_path / "never" / "memory.db"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code, str(db)], cwd=root, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert not db.parent.exists()
