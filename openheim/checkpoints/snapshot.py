"""Take a checkpoint of a root and compare the root with it afterwards.

Both steps are stat-based: a file is read (hashed, and copied into the store when new) only when its size,
mtime or inode differ from what the store's stat cache (or the checkpoint) says, or when its mtime is too close
to the moment it was last looked at to be trusted (the kernel's file clock is coarse).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from openheim.checkpoints.scan import FileStat, scan
from openheim.checkpoints.store import Change, CheckpointStore, sha256_file

RACY_NS = 20_000_000  # an mtime within 20 ms of the look that recorded it is not trusted


@dataclass(eq=False)
class Snapshot:
    """A checkpoint as the turn that took it holds it: its id, the files' stats and hashes."""

    checkpoint: str
    root: str
    stats: dict[str, FileStat]
    files: dict[str, list]  # path -> [sha256 | None, size, mode]
    taken_ns: int


def take(store: CheckpointStore, root: str, size_cap: int, max_files: int,
         skip: frozenset[str] = frozenset()) -> Snapshot:
    """Checkpoint ``root``: copy every file not yet in the store (up to ``size_cap`` bytes) and save a manifest."""
    started = time.time_ns()
    stats = scan(root, max_files, skip)
    index = store.load_index(root)
    new_index: dict[str, list] = {}
    files: dict[str, list] = {}
    dirty = len(index) != len(stats)
    for path, st in stats.items():
        row = index.get(path)
        if (row is not None and row[0] == st.size and row[1] == st.mtime_ns and row[2] == st.ino
                and row[4] - st.mtime_ns > RACY_NS):
            digest, seen = row[3], row[4]
        else:
            try:
                digest = store.put_file(os.path.join(root, path)) if st.size <= size_cap else None
            except OSError:
                continue  # vanished or unreadable: not part of the checkpoint
            seen, dirty = started, True
        new_index[path] = [st.size, st.mtime_ns, st.ino, digest, seen]
        files[path] = [digest, st.size, st.mode]
    if dirty:
        store.save_index(root, new_index)
    stats = {p: s for p, s in stats.items() if p in files}
    return Snapshot(store.save_manifest(root, files), root, stats, files, started)


def changes_since(snapshot: Snapshot, size_cap: int, max_files: int,
                  skip: frozenset[str] = frozenset()) -> list[Change]:
    """What changed under the snapshot's root since it was taken: added, modified and deleted files."""
    now = scan(snapshot.root, max_files, skip)
    changes: list[Change] = []
    for path, st in sorted(now.items()):
        old = snapshot.stats.get(path)
        if old is None:
            changes.append(Change(path, "added", None, _hash(snapshot.root, path, st, size_cap)))
            continue
        if ((old.size, old.mtime_ns, old.ino) == (st.size, st.mtime_ns, st.ino)
                and snapshot.taken_ns - old.mtime_ns > RACY_NS):
            continue
        before = snapshot.files[path][0]
        after = _hash(snapshot.root, path, st, size_cap)
        if after is not None and after == before:
            continue
        if after is None and before is None and (old.size, old.mtime_ns) == (st.size, st.mtime_ns):
            continue  # too big to hash and its stat did not change
        changes.append(Change(path, "modified", before, after, restorable=before is not None))
    for path in sorted(set(snapshot.stats) - set(now)):
        before = snapshot.files[path][0]
        changes.append(Change(path, "deleted", before, None, restorable=before is not None))
    return changes


def _hash(root: str, path: str, st: FileStat, size_cap: int) -> str | None:
    if st.size > size_cap:
        return None
    try:
        return sha256_file(os.path.join(root, path))
    except OSError:
        return None
