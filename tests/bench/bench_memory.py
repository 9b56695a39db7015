"""Long-term memory speed at 10k and 100k notes: FTS5 p50, KNN p50 (384 dims), insert throughput.

Run: .venv/bin/python tests/bench/bench_memory.py [--small]   (--small: 2k and 20k notes, a smoke run)
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from itertools import accumulate
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from openheim.memory.long_term import LongTermMemory
from openheim.memory.store import VectorStore

DIMS = 384
VOCAB = 20_000
STOP_WORDS = 50  # the most frequent words; ordinary queries skip them
FTS_TARGET_MS, KNN_TARGET_MS, INSERT_TARGET = 10.0, 80.0, 5_000.0


class Corpus:
    """Zipf-distributed pseudo-words, so term frequencies look like text's."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.words = ["".join(self.rng.choices(letters, k=self.rng.randint(3, 9))) + str(i) for i in range(VOCAB)]
        self.cum = list(accumulate(1.0 / (rank + 1) ** 1.07 for rank in range(VOCAB)))
        self.vectors = [[self.rng.gauss(0, 1) for _ in range(DIMS)] for _ in range(1024)]

    def note(self) -> str:
        return " ".join(self.rng.choices(self.words, cum_weights=self.cum, k=self.rng.randint(10, 30)))

    def query(self, with_stop_word: bool = False) -> str:
        words = self.rng.choices(self.words[STOP_WORDS:], cum_weights=self.cum[STOP_WORDS:], k=self.rng.randint(2, 4))
        if with_stop_word:
            words.append(self.words[self.rng.randrange(5)])
        return " ".join(words)

    def batch(self, n: int, start: int) -> list[tuple[str, list[float]]]:
        return [(self.note(), self.vectors[(start + i) % len(self.vectors)]) for i in range(n)]


def p50_ms(fn, args: list) -> float:
    fn(args[0])  # warm-up
    times = []
    for a in args:
        t = time.perf_counter()
        fn(a)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def fill(store: VectorStore, corpus: Corpus, count: int, start: int) -> float:
    """Insert ``count`` notes with precomputed vectors in 1,000-note transactions; notes/s."""
    batches = [corpus.batch(min(1000, count - i), start + i) for i in range(0, count, 1000)]
    t = time.perf_counter()
    for b in batches:
        store.insert_many(b)
    rate = count / (time.perf_counter() - t)
    store.checkpoint()  # steady state: the notes live in the database file, not the WAL
    return rate


class InProcessEmbedder:
    model = "bench"

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.corpus.vectors[hash(t) % len(self.corpus.vectors)] for t in texts]


def measure(store: VectorStore, ltm: LongTermMemory, corpus: Corpus) -> dict[str, float]:
    queries = [corpus.query() for _ in range(200)]
    stop = [corpus.query(with_stop_word=True) for _ in range(50)]
    vectors = [corpus.vectors[i] for i in range(0, 1024, 20)]
    single = [corpus.batch(1, i)[0] for i in range(300)]
    t = time.perf_counter()
    for content, vector in single:
        store.insert(content, vector)
    single_rate = len(single) / (time.perf_counter() - t)
    return {
        "fts": p50_ms(lambda q: store.keyword_search(q, 5), queries),
        "fts_stop": p50_ms(lambda q: store.keyword_search(q, 5), stop),
        "knn": p50_ms(lambda v: store.semantic_search(v, 5), vectors),
        "ltm": p50_ms(lambda q: ltm.search(q, 5), queries[:30]),
        "single": single_rate,
    }


def row(name: str, value: float, unit: str, target: float | None, higher_is_better: bool = False) -> str:
    if target is None:
        return f"{name:<42}{value:>10.1f} {unit:<9}{'-':>10}{'-':>8}  info"
    ratio = value / target
    ok = ratio >= 1 if higher_is_better else ratio <= 1
    sign = ">=" if higher_is_better else "<="
    return (
        f"{name:<42}{value:>10.1f} {unit:<9}{sign + format(target, 'g'):>10}{ratio:>8.2f}  {'pass' if ok else 'FAIL'}"
    )


def report(small: int, large: int, at: dict[int, dict[str, float]], inserts: dict[int, float]) -> bool:
    lines, passed = [], True
    print(f"\n{'metric':<42}{'measured':>10} {'unit':<9}{'target':>10}{'ratio':>8}  result")
    for n in (small, large):
        m = at[n]
        k = f"{n // 1000}k"
        lines += [
            row(f"FTS5 search p50 @ {k}", m["fts"], "ms", FTS_TARGET_MS),
            row(f"KNN search p50, {DIMS} dims @ {k}", m["knn"], "ms", KNN_TARGET_MS),
            row(f"insert, vectors precomputed @ {k}", inserts[n], "notes/s", INSERT_TARGET, True),
            row(f"FTS5 p50, query with a stop word @ {k}", m["fts_stop"], "ms", None),
            row(f"LongTermMemory.search p50 (semantic) @ {k}", m["ltm"], "ms", None),
            row(f"insert, one transaction per note @ {k}", m["single"], "notes/s", None),
        ]
    for line in lines:
        print(line)
        passed &= not line.endswith("FAIL")
    print(f"\ngrowth {small // 1000}k -> {large // 1000}k notes (x{large // small} data):")
    for key, label in (
        ("fts", "FTS5 p50"),
        ("knn", "KNN p50"),
        ("fts_stop", "FTS5 stop-word p50"),
        ("ltm", "LongTermMemory.search p50"),
    ):
        print(f"  {label:<28} x{at[large][key] / at[small][key]:.2f}")
    print(f"  {'insert throughput':<28} x{inserts[large] / inserts[small]:.2f}")
    return passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="2k and 20k notes instead of 10k and 100k")
    small, large = (2_000, 20_000) if parser.parse_args().small else (10_000, 100_000)
    corpus = Corpus()
    print(f"python {sys.version.split()[0]} ({sys.executable})")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.db"
        store = VectorStore(path)
        print(f"driver: {store.driver.name}, vectors: {store.vectors_available}")
        store.ensure_embedding_space(InProcessEmbedder.model, DIMS)
        ltm = LongTermMemory(path, InProcessEmbedder(corpus))
        at, inserts, done = {}, {}, 0
        for n in (small, large):
            inserts[n] = fill(store, corpus, n - done, done)
            done = n
            at[n] = measure(store, ltm, corpus)
            done += 300  # measure() adds single inserts
        ltm.close()
        store.close()
    return 0 if report(small, large, at, inserts) else 1


if __name__ == "__main__":
    sys.exit(main())
