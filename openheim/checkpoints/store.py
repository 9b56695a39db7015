"""The checkpoint store under ``{data_dir}/checkpoints``: content-addressed file copies, checkpoint manifests,
a stat cache per root, and one log of turn records per session.

    blobs/ab/cdef…         a file's bytes, named by their SHA-256 (written once, shared by every checkpoint)
    manifests/<id>.json    one checkpoint: {"root": …, "files": {path: [sha256 | null, size, mode]}}
    index/<root key>.json  stat cache: {path: [size, mtime_ns, ino, sha256 | null]}, so an unchanged file
                           is never read again
    sessions/<id>.jsonl    the session's turn records and undo records, one JSON object per line

Nothing is ever written to the user's repository. A file bigger than the size cap gets no copy (sha256 null):
it is listed as not restorable.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openheim.config.bounded_read import read_bounded
from openheim.config.private_data import make_private, open_private

READ_CHUNK = 1 << 20


@dataclass
class Change:
    """One file a turn changed: ``kind`` added | modified | deleted; hashes None when absent or over the cap."""

    path: str
    kind: str
    before: str | None
    after: str | None
    restorable: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "before": self.before,
            "after": self.after,
            "restorable": self.restorable,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Change:
        return cls(str(d["path"]), str(d["kind"]), d.get("before"), d.get("after"), bool(d.get("restorable", True)))


@dataclass(eq=False)
class TurnRecord:
    """What one turn changed under its root, and the checkpoint taken before it."""

    turn: int  # the 1-based number of the turn in its session
    at: int  # index of the turn's prompt in the conversation
    root: str
    checkpoint: str
    changes: list[Change]
    created: float = field(default_factory=time.time)
    undone: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "turn",
            "turn": self.turn,
            "at": self.at,
            "root": self.root,
            "checkpoint": self.checkpoint,
            "created": self.created,
            "changes": [c.to_dict() for c in self.changes],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TurnRecord:
        return cls(
            int(d["turn"]),
            int(d.get("at", 0)),
            str(d["root"]),
            str(d["checkpoint"]),
            [Change.from_dict(c) for c in d.get("changes") or []],
            float(d.get("created") or 0),
        )


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class CheckpointStore:
    """Blobs, manifests, stat caches and session logs in one directory."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._index_cache: dict[str, tuple[float, dict[str, list]]] = {}
        self._made: set[Path] = set()  # blob directories known to exist

    # --- blobs ---------------------------------------------------------------

    def blob_path(self, digest: str) -> Path:
        return self.dir / "blobs" / digest[:2] / digest[2:]

    def has_blob(self, digest: str) -> bool:
        return self.blob_path(digest).is_file()

    def put_file(self, path: str, cap: int = 1 << 40) -> str:
        """Copy a file into the store (once per content); its SHA-256. The file is read once, through the
        bounded reader (a regular file, no link followed, at most ``cap`` bytes): what is hashed is what is
        stored. The copy is 0600 in 0700 directories: never more readable than its source."""
        data = read_bounded(path, cap, follow=False)
        digest = hashlib.sha256(data).hexdigest()
        target = self.blob_path(digest)
        if not target.is_file():
            if target.parent not in self._made:
                make_private(target.parent)
                self._made.add(target.parent)
            tmp = f"{target}.{os.getpid()}-{threading.get_ident()}.tmp"
            try:
                with open_private(tmp) as out:
                    out.write(data)
                os.replace(tmp, target)
            except BaseException:
                _unlink(tmp)
                raise
        return digest

    def read_blob(self, digest: str) -> bytes:
        return self.blob_path(digest).read_bytes()

    # --- manifests -------------------------------------------------------------

    def save_manifest(self, root: str, files: dict[str, list]) -> str:
        body = json.dumps({"root": root, "files": files}, sort_keys=True, separators=(",", ":")).encode()
        checkpoint = hashlib.sha256(body).hexdigest()[:32]
        path = self.dir / "manifests" / f"{checkpoint}.json"
        if not path.is_file():
            _atomic_write(path, body)
        return checkpoint

    def has_manifest(self, checkpoint: str) -> bool:
        return (self.dir / "manifests" / f"{checkpoint}.json").is_file()

    def load_manifest(self, checkpoint: str) -> dict[str, list]:
        data = json.loads((self.dir / "manifests" / f"{checkpoint}.json").read_bytes())
        return dict(data["files"])

    # --- stat cache --------------------------------------------------------------

    def index_path(self, root: str) -> Path:
        return self.dir / "index" / f"{hashlib.sha256(root.encode()).hexdigest()[:24]}.json"

    def load_index(self, root: str) -> dict[str, list]:
        """The root's stat cache: {path: [size, mtime_ns, ino, sha256, seen_ns, mode]}."""
        path = self.index_path(root)
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return {}
        cached = self._index_cache.get(root)
        if cached is not None and cached[0] == mtime:
            return cached[1]
        try:
            files = dict(json.loads(path.read_bytes()))
        except (OSError, ValueError, TypeError):
            return {}
        self._index_cache[root] = (mtime, files)
        return files

    def save_index(self, root: str, index: dict[str, list]) -> None:
        path = self.index_path(root)
        _atomic_write(path, json.dumps(index, separators=(",", ":")).encode())
        self._index_cache[root] = (path.stat().st_mtime, index)

    def load_fingerprint(self, root: str) -> tuple[str, str, int] | None:
        """(fingerprint of the root's last scan, its checkpoint, when it was taken in ns), when there is one."""
        try:
            mark, checkpoint, taken = self.index_path(root).with_suffix(".last").read_text().split()
            return mark, checkpoint, int(taken)
        except (OSError, ValueError):
            return None

    def save_fingerprint(self, root: str, mark: str, checkpoint: str, taken_ns: int) -> None:
        _atomic_write(self.index_path(root).with_suffix(".last"), f"{mark} {checkpoint} {taken_ns}\n".encode())

    def forget_indexes(self) -> None:
        shutil.rmtree(self.dir / "index", ignore_errors=True)
        self._index_cache.clear()

    # --- session logs ------------------------------------------------------------------

    def session_log(self, session_id: str) -> Path:
        return self.dir / "sessions" / f"{session_id}.jsonl"

    def append_record(self, session_id: str, record: dict[str, Any]) -> None:
        path = self.session_log(session_id)
        make_private(path.parent)
        with open_private(path, "a", binary=False) as f:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")

    def turns(self, session_id: str) -> list[TurnRecord]:
        """The session's turn records in order, each marked undone when an undo record names it."""
        try:
            lines = self.session_log(session_id).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        records: list[TurnRecord] = []
        undone: set[int] = set()
        for line in lines:
            try:
                doc = json.loads(line)
                if doc.get("type") == "turn":
                    records.append(TurnRecord.from_dict(doc))
                elif doc.get("type") == "undo":
                    undone.update(int(t) for t in doc.get("turns") or [])
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a torn last line
        for record in records:
            record.undone = record.turn in undone
        return records

    def copy_session(self, source: str, target: str) -> None:
        """A fork shares its parent's checkpoints: the turn records are copied, the blobs stay shared."""
        path = self.session_log(source)
        if path.is_file():
            _atomic_write(self.session_log(target), path.read_bytes())


def _atomic_write(path: Path, data: bytes) -> None:
    make_private(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
