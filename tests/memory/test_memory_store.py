"""VectorStore on a temp database: schema, FTS5 ranking and injection, triggers, vectors."""

from __future__ import annotations

import struct
import threading
from datetime import UTC, datetime

import pytest

from openheim.errors import DatabaseError
from openheim.memory import migrations
from openheim.memory import sqlite as rag_sqlite
from openheim.memory.store import VectorStore, fts_query, pack_vector, parse_time


@pytest.fixture
def store(tmp_path):
    s = VectorStore(tmp_path / "memory.db")
    yield s
    s.close()


def raw(store: VectorStore, sql: str, *params):
    with store._guard() as db:
        return db.execute(sql, params).fetchall()


# --- schema and migrations -------------------------------------------------------------------


def test_migrations_create_the_schema_on_an_empty_database(store):
    tables = {r[0] for r in raw(store, "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}
    assert {
        "meta",
        "memories",
        "memories_fts",
        "embedded_ids",
        "_openheim_migrations",
        "memories_ai",
        "memories_ad",
        "memories_au",
    } <= tables
    assert [r[1] for r in raw(store, "PRAGMA table_info(memories)")] == ["id", "content", "created_at"]
    assert [r[1] for r in raw(store, "PRAGMA table_info(meta)")] == ["key", "value"]
    assert [r[0] for r in raw(store, "SELECT name FROM _openheim_migrations")] == ["m001_initial"]
    assert "vec_memories" not in tables  # created lazily, once dimensions are known
    assert raw(store, "PRAGMA journal_mode")[0][0] == "wal"
    sql = raw(store, "SELECT sql FROM sqlite_master WHERE name = 'memories_fts'")[0][0]
    assert "remove_diacritics 2" in sql and "content='memories'" in sql


def test_migrations_are_recorded_and_not_rerun(tmp_path):
    VectorStore(tmp_path / "m.db").close()
    again = VectorStore(tmp_path / "m.db")
    with again._guard() as db:
        assert migrations.migrate(db) == []
        assert migrations.applied(db) == [fn.__name__ for fn in migrations.MIGRATIONS]
    again.close()


def test_a_database_written_by_the_reference_is_adopted(tmp_path):
    import sqlite_vec
    from pysqlite3 import dbapi2

    path = tmp_path / "rust.db"
    db = dbapi2.connect(path)
    db.enable_load_extension(True)
    sqlite_vec.load(db)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE memories (id INTEGER PRIMARY KEY, content TEXT NOT NULL, created_at TEXT NOT NULL);
        CREATE VIRTUAL TABLE memories_fts USING fts5(content, content='memories', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2');
        CREATE TRIGGER rust_ins AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END;
        CREATE TRIGGER rust_del AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.id, old.content); END;
        CREATE TRIGGER rust_upd AFTER UPDATE ON memories BEGIN
            INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.id, old.content);
            INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END;
        CREATE VIRTUAL TABLE vec_memories USING vec0(memory_id INTEGER PRIMARY KEY,
            embedding FLOAT[2] distance_metric=cosine);
        INSERT INTO meta VALUES ('model', 'm'), ('dimensions', '2');
        INSERT INTO memories VALUES (1, 'written by rust', '2025-01-02T03:04:05.123456789+00:00');
    """)
    db.commit()
    db.close()
    store = VectorStore(path)
    assert [h.id for h in store.keyword_search("rust", 5)] == [1]
    assert store.get(1).created_at.year == 2025
    store.insert("written by python")
    raw(store, "INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")  # indexed once
    assert len(raw(store, "SELECT name FROM sqlite_master WHERE type = 'trigger'")) == 3
    assert store.ensure_embedding_space("m", 2) is True  # old vectors are not trusted: rebuilt
    store.close()


def test_migration_list_is_ordered_and_uniquely_named():
    names = [fn.__name__ for fn in migrations.MIGRATIONS]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert all(n.startswith(f"m{i + 1:03d}_") for i, n in enumerate(names))


# --- keyword search --------------------------------------------------------------------------


def test_fts_query_quotes_every_word():
    assert fts_query('"foo" OR content:*') == '"foo" OR "OR" OR "content"'
    assert fts_query("NEAR(a b)") == '"NEAR" OR "a" OR "b"'
    assert fts_query("snake_case-word") == '"snake" OR "case" OR "word"'
    assert fts_query('* ^ ( ) " - + :') is None
    assert fts_query("") is None


def test_keyword_search_ranks_by_bm25(store):
    store.insert("the cat sat on the mat")
    best = store.insert("cat food for the cat: cat treats")
    store.insert("dogs bark at the postman")
    hits = store.keyword_search("cat", 5)
    assert next(h.id for h in hits) == best
    assert len(hits) == 2
    assert all(h.kind == "rank" and h.score > 0 for h in hits)
    assert hits[0].score >= hits[1].score


def test_keyword_search_ors_the_words(store):
    a = store.insert("apples are red")
    b = store.insert("bananas are yellow")
    both = store.insert("apples and bananas")
    hits = store.keyword_search("apples bananas", 5)
    assert {h.id for h in hits} == {a, b, both}
    assert hits[0].id == both


@pytest.mark.parametrize(
    "query",
    [
        '"foo" OR content:*',
        "NEAR(",
        "NEAR(foo bar, 2)",
        "*",
        "^",
        '"unmatched',
        "foo AND",
        "content:bar",
        "-foo",
        "(",
        ")",
        "foo*",
        "^foo",
        "{content}: x",
        "'",
        "\\",
        "AND OR NOT",
        "foo\x00bar",
    ],
)
def test_keyword_search_survives_fts_syntax(store, query):
    store.insert("foo is a word")
    store.insert("near the river bank")
    hits = store.keyword_search(query, 10)  # never raises
    words = {w.lower() for w in (fts_query(query) or "").replace('"', "").split(" OR ") if w}
    for h in hits:
        assert words & set(h.content.lower().split())


def test_keyword_search_injection_does_not_match_everything(store):
    store.insert("alpha")
    store.insert("beta")
    assert store.keyword_search("*", 10) == []
    assert store.keyword_search("alpha OR *", 10)[0].content == "alpha"
    assert [h.content for h in store.keyword_search('"alpha" OR content:*', 10)] == ["alpha"]
    assert store.keyword_search("NEAR(", 10) == []


def test_keyword_search_folds_diacritics_and_case(store):
    cafe = store.insert("Meeting at the Café Crème on Friday")
    store.insert("nothing to see")
    assert [h.id for h in store.keyword_search("cafe creme", 5)] == [cafe]
    assert [h.id for h in store.keyword_search("CAFÉ", 5)] == [cafe]
    assert [h.id for h in store.keyword_search("crème", 5)] == [cafe]


def test_keyword_search_handles_non_latin_scripts(store):
    ru = store.insert("Привет, мир! Ёлка стоит.")
    gr = store.insert("Καλημέρα κόσμε")
    assert [h.id for h in store.keyword_search("мир", 5)] == [ru]
    assert [h.id for h in store.keyword_search("ΚΑΛΗΜΈΡΑ", 5)] == [gr]
    assert store.keyword_search("🎉🎉", 5) == []


def test_keyword_search_limits(store):
    for i in range(5):
        store.insert(f"note {i}")
    assert len(store.keyword_search("note", 3)) == 3
    assert store.keyword_search("note", 0) == []
    assert store.keyword_search("   ", 3) == []


# --- triggers --------------------------------------------------------------------------------


def test_update_and_delete_keep_the_index_in_sync(store):
    a = store.insert("the old password hint is swordfish")
    assert store.update(a, "the new hint is marlin")
    assert store.keyword_search("swordfish", 5) == []
    assert [h.id for h in store.keyword_search("marlin", 5)] == [a]
    assert store.delete(a)
    assert store.keyword_search("marlin", 5) == []
    raw(store, "INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")


def test_update_keeps_id_and_created_at(store):
    a = store.insert("first")
    before = store.get(a)
    assert store.update(a, "second")
    after = store.get(a)
    assert (after.id, after.created_at, after.content) == (a, before.created_at, "second")
    assert store.update(999, "nothing") is False
    assert store.delete(999) is False


# --- rows ------------------------------------------------------------------------------------


def test_get_list_and_timestamps(store):
    ids = [store.insert(f"note {i}") for i in range(5)]
    assert [m.id for m in store.list(2, 1)] == ids[1:3]
    assert [m.id for m in store.list(10, after_id=ids[2])] == ids[3:]
    m = store.get(ids[0])
    assert m.created_at.tzinfo is not None
    assert abs((datetime.now(UTC) - m.created_at).total_seconds()) < 60
    assert store.get(12345) is None
    raw(store, "UPDATE memories SET created_at = 'not a date' WHERE id = ?", ids[0])
    assert store.get(ids[0]).created_at == datetime(1970, 1, 1, tzinfo=UTC)


def test_parse_time_accepts_rfc3339_variants():
    assert parse_time("2025-03-04T05:06:07Z").year == 2025
    assert parse_time("2025-03-04T05:06:07.123456789+00:00").second == 7
    assert parse_time("2025-03-04T05:06:07").tzinfo is UTC
    assert parse_time("").year == 1970


# --- vectors ---------------------------------------------------------------------------------


def test_this_machine_has_vector_search(store):
    assert store.vectors_available, store.driver.reason


def test_embedding_space_lifecycle(store):
    with pytest.raises(DatabaseError, match="embeddings provider returned an empty vector"):
        store.ensure_embedding_space("m", 0)
    assert store.ensure_embedding_space("m", 3) is False  # nothing existed before
    assert store.ensure_embedding_space("m", 3) is False  # no-op
    a = store.insert("x", [1, 0, 0])
    assert store.stats().embedded == 1
    assert store.ensure_embedding_space("m2", 3) is True  # model change: vectors dropped
    assert store.stats().embedded == 0 and [m.id for m in store.unembedded(10)] == [a]
    assert store.ensure_embedding_space("m2", 4) is True  # dimension change
    s = store.stats()
    assert (s.model, s.dimensions, s.memories) == ("m2", 4, 1)


def test_vector_without_table_is_an_error(store):
    with pytest.raises(DatabaseError, match="vector table not initialised; call ensure_embedding_space first"):
        store.insert("x", [1.0, 2.0])
    assert store.count() == 0  # nothing half-written


def test_semantic_search_orders_by_cosine(store):
    store.ensure_embedding_space("m", 3)
    a = store.insert("east", [1, 0, 0])
    b = store.insert("north-east", [1, 1, 0])
    c = store.insert("north", [0, 1, 0])
    hits = store.semantic_search([1, 0.1, 0], 3)
    assert [h.id for h in hits] == [a, b, c]
    assert hits[0].kind == "similarity" and hits[0].score == pytest.approx(0.995, abs=1e-3)
    assert hits[2].score == pytest.approx(0.0995, abs=1e-3)
    assert len(store.semantic_search([1, 0, 0], 2)) == 2
    assert store.semantic_search([1, 0, 0], 0) == []


def test_semantic_search_without_table_is_empty(store):
    store.insert("x")
    assert store.semantic_search([1.0, 0.0], 5) == []


def test_vectors_are_little_endian_f32(store):
    store.ensure_embedding_space("m", 3)
    a = store.insert("x", [0.5, -1.25, 3.0])
    blob = raw(store, "SELECT embedding FROM vec_memories WHERE memory_id = ?", a)[0][0]
    assert bytes(blob) == struct.pack("<3f", 0.5, -1.25, 3.0) == pack_vector([0.5, -1.25, 3.0])


def test_update_and_delete_manage_vectors(store):
    store.ensure_embedding_space("m", 2)
    a = store.insert("a", [1, 0])
    b = store.insert("b", [0, 1])
    assert store.unembedded(10) == []
    store.update(a, "a2")  # no vector given: the stale one goes
    assert [m.id for m in store.unembedded(10)] == [a]
    assert [h.id for h in store.semantic_search([1, 0], 5)] == [b]
    assert store.set_vector(a, [1, 0])
    assert store.unembedded(10) == []
    store.update(b, "b2", [1, 1])
    assert store.semantic_search([1, 1], 1)[0].id == b
    assert store.delete(a)
    assert store.stats().embedded == 1
    assert [h.id for h in store.semantic_search([1, 0], 5)] == [b]
    assert store.set_vector(a, [1, 0]) is False  # gone


def test_unembedded_lists_by_id_with_exclusions(store):
    ids = [store.insert(f"n{i}") for i in range(6)]
    assert [m.id for m in store.unembedded(3)] == ids[:3]  # no vector table: all notes
    store.ensure_embedding_space("m", 2)
    store.set_vector(ids[1], [1, 0])
    assert [m.id for m in store.unembedded(3, exclude={ids[0]})] == [ids[2], ids[3], ids[4]]
    assert store.unembedded(0) == []


def test_keyword_search_of_unembedded_notes_only(store):
    store.ensure_embedding_space("m", 2)
    store.insert("red apple", [1, 0])
    plain = store.insert("green apple")
    assert [h.id for h in store.keyword_search("apple", 5, unembedded_only=True)] == [plain]
    assert len(store.keyword_search("apple", 5)) == 2


def test_store_without_vectors_marks_them_stale(tmp_path):
    path = tmp_path / "m.db"
    full = VectorStore(path)
    full.ensure_embedding_space("m", 2)
    a = full.insert("a", [1, 0])
    full.close()
    fts_only = VectorStore(path, allow_vectors=False)
    assert not fts_only.vectors_available
    assert fts_only.delete(a)  # cannot reach vec0 here
    fts_only.insert("b")
    assert [h.content for h in fts_only.keyword_search("b", 5)] == ["b"]
    fts_only.close()
    again = VectorStore(path)
    assert again.ensure_embedding_space("m", 2) is True  # rebuilt, not trusted
    assert again.semantic_search([1, 0], 5) == []
    again.close()


def test_store_is_usable_from_many_threads(store):
    ids: list[int] = []

    def work(n):
        for i in range(20):
            ids.append(store.insert(f"thread {n} note {i}"))
            store.keyword_search("note", 3)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 80 and store.count() == 80


def test_insert_many_is_one_transaction(store):
    store.ensure_embedding_space("m", 2)
    ids = store.insert_many([("a", [1, 0]), ("b", None), ("c", [0, 1])])
    assert [m.id for m in store.unembedded(10)] == [ids[1]]
    with pytest.raises(DatabaseError):
        store.insert_many([("d", [1, 0]), ("e", [1, 0, 0])])  # wrong dimension rolls back d too
    assert store.count() == 3


def test_database_errors_are_wrapped(tmp_path):
    bad = tmp_path / "dir.db"
    bad.mkdir()
    with pytest.raises(DatabaseError, match="cannot open the memory database"):
        VectorStore(bad)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database, just some text " * 200)
    with pytest.raises(DatabaseError, match="not a database"):
        VectorStore(garbage)


def test_a_busy_database_is_a_database_error(tmp_path):
    path = tmp_path / "m.db"
    store = VectorStore(path)
    other = VectorStore(path)
    with other._guard() as db:
        db.execute("PRAGMA busy_timeout=50")
    with store._guard() as db:
        db.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(DatabaseError, match="locked"):
                other.insert("x")
        finally:
            db.execute("ROLLBACK")
    assert other.insert("y") == 1
    store.close()
    other.close()


def test_driver_probe_reports_why_vectors_are_off(monkeypatch):
    import sys

    monkeypatch.setattr(rag_sqlite, "_candidates", lambda stdlib: [])
    d = rag_sqlite._probe()
    assert not d.vectors and "pysqlite3-binary" in d.reason and "cannot load extensions" in d.reason
    monkeypatch.setitem(sys.modules, "sqlite_vec", None)
    d = rag_sqlite._probe()
    assert not d.vectors and "pip install sqlite-vec" in d.reason


def test_driver_probe_prefers_a_loader(monkeypatch):
    monkeypatch.setattr(rag_sqlite, "_driver", None)
    d = rag_sqlite.select_driver()
    assert d.vectors and d.name in ("sqlite3", "pysqlite3")
    assert rag_sqlite.select_driver() is d  # probed once
    assert "platform_machine" in rag_sqlite.PYSQLITE3_REQUIREMENT
