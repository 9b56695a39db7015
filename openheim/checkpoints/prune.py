"""Pruning the checkpoint store: session records older than ``max_age_days`` go, then the oldest sessions until
the store is under ``max_store_mb``; manifests and copies no remaining record needs are then deleted."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from openheim.checkpoints.store import CheckpointStore
from openheim.config.private_data import make_private, open_private

PRUNE_EVERY_SECS = 24 * 3600


def prune(store: CheckpointStore, max_age_days: float, max_store_mb: int, force: bool = False) -> int:
    """Prune (at most once a day unless ``force``); the number of session records removed."""
    stamp = store.dir / "last-prune"
    now = time.time()
    try:
        if not force and now - stamp.stat().st_mtime < PRUNE_EVERY_SECS:
            return 0
    except OSError:
        pass
    if not store.dir.is_dir():
        return 0
    logs = sorted(((p.stat().st_mtime, p) for p in (store.dir / "sessions").glob("*.jsonl")), key=lambda t: t[0])
    removed = 0
    kept: list[Path] = []
    for mtime, path in logs:
        if now - mtime > max_age_days * 86400:
            path.unlink(missing_ok=True)
            removed += 1
        else:
            kept.append(path)
    size = _blob_bytes(store)
    while kept and size > max_store_mb * 1024 * 1024:
        kept.pop(0).unlink(missing_ok=True)
        removed += 1
        size = _sweep(store, kept)
    if removed:
        _sweep(store, kept)
    make_private(stamp.parent)
    open_private(stamp, "a").close()
    os.utime(stamp)
    return removed


def _sweep(store: CheckpointStore, logs: list[Path]) -> int:
    """Delete manifests and blobs no remaining record refers to; the bytes of blobs left."""
    manifests: set[str] = set()
    for path in logs:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("type") == "turn":
                manifests.add(str(doc.get("checkpoint")))
    blobs: set[str] = set()
    for path in (store.dir / "manifests").glob("*.json"):
        if path.stem not in manifests:
            path.unlink(missing_ok=True)
            continue
        for row in json.loads(path.read_bytes()).get("files", {}).values():
            if row and row[0]:
                blobs.add(row[0])
    size = 0
    for path in (store.dir / "blobs").glob("*/*"):
        digest = path.parent.name + path.name
        if digest in blobs:
            size += path.stat().st_size
        else:
            path.unlink(missing_ok=True)
    store.forget_indexes()  # the stat caches may name copies that are gone
    return size


def _blob_bytes(store: CheckpointStore) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(store.dir / "blobs"):
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
    return total
