"""Take a checkpoint of a root and compare the root with it afterwards.

Both steps are stat-based. A scan whose fingerprint (every path with its size, mtime, inode and mode) matches the
root's last checkpoint is that checkpoint: nothing is read. Otherwise a file is read (hashed, and copied into the
store when new) only when its stat differs from the store's stat cache, or when its mtime is too close to the
moment it was last looked at to be trusted (the kernel's file clock is coarse).
"""

from __future__ import annotations

import hashlib
import marshal
import os
import time
from dataclasses import dataclass, field

from openheim.checkpoints.scan import FileStat, scan
from openheim.checkpoints.store import Change, CheckpointStore, sha256_file

RACY_NS = 20_000_000  # an mtime within 20 ms of the look that recorded it is not trusted


@dataclass(eq=False)
class Snapshot:
    """A checkpoint as the turn that took it holds it: its id and the files' stats (hashes read on demand)."""

    store: CheckpointStore
    checkpoint: str
    root: str
    stats: dict[str, FileStat]
    taken_ns: int
    _files: dict[str, list] | None = field(default=None, repr=False)

    @property
    def files(self) -> dict[str, list]:
        """path -> [sha256 | None, size, mode], from the manifest (read only when a turn changed something)."""
        if self._files is None:
            self._files = self.store.load_manifest(self.checkpoint)
        return self._files


def fingerprint(stats: dict[str, FileStat]) -> str:
    return hashlib.blake2b(marshal.dumps(stats), digest_size=16).hexdigest()


def take(
    store: CheckpointStore, root: str, size_cap: int, max_files: int, skip: frozenset[str] = frozenset()
) -> Snapshot:
    """Checkpoint ``root``: copy every file not yet in the store (up to ``size_cap`` bytes) and save a manifest."""
    started = time.time_ns()
    stats = scan(root, max_files, skip)
    mark = fingerprint(stats)
    last = store.load_fingerprint(root)
    if (
        last is not None
        and last[0] == mark
        and store.has_manifest(last[1])
        and all(last[2] - st[1] > RACY_NS for st in stats.values())
    ):
        return Snapshot(store, last[1], root, stats, started)  # nothing changed since the root's last checkpoint
    files = _hash_changed(store, root, stats, size_cap, started)
    if len(files) != len(stats):
        stats = {p: s for p, s in stats.items() if p in files}
        mark = fingerprint(stats)
    checkpoint = store.save_manifest(root, files)
    store.save_fingerprint(root, mark, checkpoint, started)
    return Snapshot(store, checkpoint, root, stats, started, files)


def _hash_changed(
    store: CheckpointStore, root: str, stats: dict[str, FileStat], size_cap: int, started: int
) -> dict[str, list]:
    """The manifest rows of ``stats``: hashes from the stat cache, files whose stat changed read and stored."""
    index = store.load_index(root)
    new_index: dict[str, list] = {}
    files: dict[str, list] = {}
    dirty = len(index) != len(stats)
    for path, (size, mtime_ns, ino, mode) in stats.items():
        row = index.get(path)
        if (
            row is not None
            and row[0] == size
            and row[1] == mtime_ns
            and row[2] == ino
            and row[5] == mode
            and row[4] - mtime_ns > RACY_NS
        ):
            digest = row[3]
            new_index[path] = row
        else:
            try:
                digest = store.put_file(os.path.join(root, path), size_cap) if size <= size_cap else None
            except OSError:
                continue  # vanished or unreadable: not part of the checkpoint
            dirty = True
            new_index[path] = [size, mtime_ns, ino, digest, started, mode]
        files[path] = [digest, size, mode]
    if dirty:
        store.save_index(root, new_index)
    return files


def changes_since(
    snapshot: Snapshot, size_cap: int, max_files: int, skip: frozenset[str] = frozenset()
) -> list[Change]:
    """What changed under the snapshot's root since it was taken: added, modified and deleted files."""
    now = scan(snapshot.root, max_files, skip)
    changes: list[Change] = []
    for path, st in sorted(now.items()):
        old = snapshot.stats.get(path)
        if old is None:
            changes.append(Change(path, "added", None, _hash(snapshot.root, path, st, size_cap)))
            continue
        if old[:3] == st[:3] and snapshot.taken_ns - old[1] > RACY_NS:
            continue
        before = snapshot.files[path][0]
        after = _hash(snapshot.root, path, st, size_cap)
        if after is not None and after == before:
            continue
        if after is None and before is None and old[:2] == st[:2]:
            continue  # too big to hash and its stat did not change
        changes.append(Change(path, "modified", before, after, restorable=before is not None))
    for path in sorted(set(snapshot.stats) - set(now)):
        before = snapshot.files[path][0]
        changes.append(Change(path, "deleted", before, None, restorable=before is not None))
    return changes


def _hash(root: str, path: str, st: FileStat, size_cap: int) -> str | None:
    if st[0] > size_cap:
        return None
    try:
        return sha256_file(os.path.join(root, path))
    except OSError:
        return None
