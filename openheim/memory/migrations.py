"""The memory database schema as an append-only list of migrations recorded in the database.

Never edit or reorder a migration that has shipped: add a new ``m00N_…`` function at the end.
The vector table is not here: its dimension is only known once an embedding comes back, so
the store creates it lazily.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

Migration = Callable[[Any], None]
MIGRATIONS: list[Migration] = []

TABLE = "_openheim_migrations"


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration."""
    MIGRATIONS.append(fn)
    return fn


@migration
def m001_initial(db: Any) -> None:
    """The reference schema: meta, memories, the FTS5 index with its triggers, and embedded_ids."""
    # IF NOT EXISTS: a database written by the Rust openheim already has these objects.
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(
        "CREATE TABLE IF NOT EXISTS memories (id INTEGER PRIMARY KEY, content TEXT NOT NULL, created_at TEXT NOT NULL)"
    )
    if not _exists(db, "memories_fts"):
        # An existing index (a Rust-written database) comes with its own sync triggers.
        _create_fts(db)
    # Which notes have a vector: a plain table, because point lookups in vec0 are slow.
    db.execute("CREATE TABLE IF NOT EXISTS embedded_ids (memory_id INTEGER PRIMARY KEY)")
    if _exists(db, "vec_memories"):
        # Vectors from before this table existed cannot be listed without sqlite-vec: rebuild them.
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('vectors_stale', '1')")


def _exists(db: Any, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def _create_fts(db: Any) -> None:
    """The external-content FTS5 index over memories.content and the triggers that keep it in sync."""
    db.execute(
        "CREATE VIRTUAL TABLE memories_fts USING fts5("
        "content, content='memories', content_rowid='id', "
        "tokenize='unicode61 remove_diacritics 2')"
    )
    db.execute(
        "CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN "
        "INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END"
    )
    db.execute(
        "CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN "
        "INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.id, old.content); "
        "END"
    )
    db.execute(
        "CREATE TRIGGER memories_au AFTER UPDATE ON memories BEGIN "
        "INSERT INTO memories_fts(memories_fts, rowid, content) VALUES ('delete', old.id, old.content); "
        "INSERT INTO memories_fts(rowid, content) VALUES (new.id, new.content); END"
    )


def applied(db: Any) -> list[str]:
    """Names of the migrations already recorded, in the order they ran."""
    db.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    return [row[0] for row in db.execute(f"SELECT name FROM {TABLE} ORDER BY rowid")]


def migrate(db: Any) -> list[str]:
    """Apply every pending migration in order, each in its own transaction; the names applied."""
    done = set(applied(db))
    ran = []
    for fn in MIGRATIONS:
        if fn.__name__ not in done and _apply(db, fn):
            ran.append(fn.__name__)
    return ran


def _apply(db: Any, fn: Migration) -> bool:
    """Run one migration unless another process recorded it meanwhile; True if it ran here."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if db.execute(f"SELECT 1 FROM {TABLE} WHERE name = ?", (fn.__name__,)).fetchone():
            db.execute("COMMIT")
            return False
        fn(db)
        db.execute(
            f"INSERT INTO {TABLE} (name, applied_at) VALUES (?, ?)",
            (fn.__name__, datetime.now(UTC).isoformat(timespec="seconds")),
        )
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return True
