"""LongTermMemory: notes kept across sessions, searched by meaning when embeddings are configured.

The database is opened on first use, so a prompt that never touches memory never opens it.
Embedding failures never fail a call: notes are stored without a vector and back-filled by a
later successful embedding call (up to 256 per call, 64 per request).
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.errors import ApiError, ConfigError, DatabaseError, HttpError, file_error

if TYPE_CHECKING:
    from openheim.memory.embedding import EmbeddingClient
    from openheim.memory.results import MemoryStats, ReembedResult, SearchResult
    from openheim.memory.store import Hit, Memory, VectorStore

log = logging.getLogger(__name__)

DEFAULT_TOP_K = 5
BACKFILL_LIMIT = 256
BACKFILL_BATCH = 64
_REFUSAL_STATUSES = (400, 413, 422)  # the provider rejects this input, not the request as a whole

Progress = Callable[[int, int], None]


def _is_refusal(error: Exception) -> bool:
    return isinstance(error, HttpError) and error.status in _REFUSAL_STATUSES


class LongTermMemory:
    """remember / search / edit / forget over a VectorStore, with optional embeddings."""

    def __init__(self, db_path: Path, embedder: EmbeddingClient | None = None, top_k: int = DEFAULT_TOP_K) -> None:
        self.db_path = Path(db_path)
        self.embedder = embedder
        self.top_k = top_k if top_k > 0 else DEFAULT_TOP_K
        self._store: VectorStore | None = None
        self._open_lock = threading.Lock()
        self._fill_lock = threading.Lock()
        self._refused: set[int] = set()

    @property
    def semantic_configured(self) -> bool:
        """True when an embedding provider is configured (vectors may still be unavailable)."""
        return self.embedder is not None

    def _db(self) -> VectorStore:
        with self._open_lock:
            if self._store is None:
                self._store = self._open()
            return self._store

    def _open(self) -> VectorStore:
        from openheim.memory.sqlite import notice_vectors_off
        from openheim.memory.store import VectorStore

        try:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise file_error(e, "create directory", None if e.filename else self.db_path.parent) from None
        store = VectorStore(self.db_path)
        if self.embedder is not None and not store.vectors_available:
            notice_vectors_off(store.driver.reason)
        return store

    def close(self) -> None:
        with self._open_lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def _embed(self, store: VectorStore, texts: list[str]) -> list[list[float]]:
        """Embed ``texts`` and make the vector table fit them; raises on any failure."""
        embedder = self.embedder
        if embedder is None:
            raise ConfigError("no embedding provider is configured")
        vectors = embedder.embed(texts)
        dims = len(vectors[0]) if vectors else 0
        if any(len(v) != dims for v in vectors):
            raise ApiError("embeddings provider returned vectors of different lengths")
        if store.ensure_embedding_space(embedder.model, dims):
            log.info(
                "memory: embedding space changed to %s (%d dimensions); notes will be re-embedded", embedder.model, dims
            )
            self._refused.clear()
        return vectors

    def _try_embed(self, store: VectorStore, text: str) -> tuple[list[float] | None, str]:
        """The vector of ``text``, or None and why not."""
        if self.embedder is None:
            return None, "no embedding provider is configured"
        if not store.vectors_available:
            return None, f"vector search is unavailable: {store.driver.reason}"
        try:
            return self._embed(store, [text])[0], ""
        except Exception as e:  # an embedding outage must never fail the call
            log.warning("memory: embedding failed: %s", e)
            return None, str(e) or type(e).__name__

    def _after_embedding(self, store: VectorStore) -> None:
        try:
            self._backfill(store)
        except Exception as e:
            log.warning("memory: back-filling vectors failed: %s", e)

    def _backfill(self, store: VectorStore) -> int:
        """Embed up to 256 notes that have no vector yet; how many got one."""
        if not self._fill_lock.acquire(blocking=False):
            return 0  # another thread is back-filling
        try:
            attempted = embedded = 0
            while attempted < BACKFILL_LIMIT:
                notes = store.unembedded(min(BACKFILL_BATCH, BACKFILL_LIMIT - attempted), exclude=self._refused)
                if not notes:
                    break
                attempted += len(notes)
                embedded += self._embed_notes(store, notes)
            return embedded
        finally:
            self._fill_lock.release()

    def _embed_notes(self, store: VectorStore, notes: list[Memory]) -> int:
        """Give ``notes`` vectors; a note the provider refuses is found by halving and skipped."""
        try:
            vectors = self._embed(store, [n.content for n in notes])
        except Exception as e:
            if not _is_refusal(e):
                raise
            if len(notes) == 1:
                self._refused.add(notes[0].id)
                log.warning(
                    "memory: the embeddings provider refused memory #%d (%s); it stays keyword-only until restart",
                    notes[0].id,
                    e,
                )
                return 0
            mid = len(notes) // 2
            return self._embed_notes(store, notes[:mid]) + self._embed_notes(store, notes[mid:])
        return sum(store.set_vector(n.id, v) for n, v in zip(notes, vectors))

    def remember(self, content: str) -> int:
        """Store a note (with a vector when embedding works); its id."""
        store = self._db()
        vector, _ = self._try_embed(store, content)
        memory_id = store.insert(content, vector)
        if vector is not None:
            self._after_embedding(store)
        return memory_id

    def edit(self, memory_id: int, content: str) -> bool:
        """Replace a note's text (its stale vector goes); False if there is no such note."""
        store = self._db()
        vector, _ = self._try_embed(store, content)
        self._refused.discard(memory_id)
        updated = store.update(memory_id, content, vector)
        if vector is not None:
            self._after_embedding(store)
        return updated

    def forget(self, memory_id: int) -> bool:
        """Delete a note; whether it existed."""
        self._refused.discard(memory_id)
        return self._db().delete(memory_id)

    def get(self, memory_id: int) -> Memory | None:
        return self._db().get(memory_id)

    def list(self, limit: int = 50, offset: int = 0) -> list[Memory]:
        """Notes in id order."""
        return self._db().list(limit, offset)

    def count(self) -> int:
        return self._db().count()

    def search(self, query: str, k: int | None = None) -> builtins.list[Hit]:
        """The best ``k`` (default top_k) notes for ``query``."""
        return self.search_detailed(query, k).hits

    def search_detailed(self, query: str, k: int | None = None) -> SearchResult:
        """Search by meaning when possible, else by keyword, and say which ran and why."""
        from openheim.memory.results import SearchResult

        k = self.top_k if k is None else k
        if not query.strip() or k <= 0:
            return SearchResult([], "none", "the query is empty" if not query.strip() else "k is 0")
        store = self._db()
        vector, why = self._try_embed(store, query)
        if vector is None:
            if self.embedder is not None and store.vectors_available:
                why = f"embedding the query failed ({why}); fell back to keyword search"
            return SearchResult(store.keyword_search(query, k), "keyword", why)
        self._after_embedding(store)
        return self._combine(store, query, vector, k)

    def _combine(self, store: VectorStore, query: str, vector: builtins.list[float], k: int) -> SearchResult:
        """KNN hits, preceded by keyword matches among notes that have no vector yet."""
        from openheim.memory.results import SearchResult

        semantic = store.semantic_search(vector, k)
        model = self.embedder.model if self.embedder else ""
        pending = store.keyword_search(query, k, unembedded_only=True) if store.unembedded(1) else []
        if not pending:
            return SearchResult(semantic, "semantic", f"nearest notes by meaning ({model})")
        seen = {h.id for h in pending}
        hits = (pending + [h for h in semantic if h.id not in seen])[:k]
        return SearchResult(
            hits,
            "hybrid",
            f"{len(pending)} keyword match(es) among notes without a vector "
            f"listed first, then nearest notes by meaning ({model})",
        )

    def reembed(self, progress: Progress | None = None) -> ReembedResult:
        """Embed every note again from its text; ``progress(done, total)`` after each batch."""
        from openheim.memory.results import ReembedResult

        if self.embedder is None:
            raise ConfigError(
                "no embedding provider is configured; set [memory] embedding_provider and "
                "embedding_model in config.toml"
            )
        store = self._db()
        if not store.vectors_available:
            raise DatabaseError(f"vector search is unavailable: {store.driver.reason}")
        with self._fill_lock:
            self._refused.clear()
            total, done, embedded, last = store.count(), 0, 0, None
            while notes := store.list(BACKFILL_BATCH, after_id=last):
                embedded += self._embed_notes(store, notes)
                done, last = done + len(notes), notes[-1].id
                if progress is not None:
                    progress(min(done, total), total)
            store.checkpoint()
            return ReembedResult(embedded, sorted(self._refused))

    def stats(self) -> MemoryStats:
        """Counts, the stored embedding space, and whether vectors are available."""
        from openheim.memory.results import MemoryStats

        store = self._db()
        s = store.stats()
        return MemoryStats(
            str(self.db_path),
            s.memories,
            s.embedded,
            s.dimensions,
            s.model,
            self.embedder.model if self.embedder else None,
            store.vectors_available,
            store.driver.reason,
        )
