"""Undo the file changes of a session's last turns: plan (what will be restored, what is protected), then apply.

A file is restored to what it was before the earliest undone turn; a file those turns added is removed. A file
that no longer holds what the latest undone turn left (the user changed it since) is a conflict: nothing is
written unless ``force``. Paths are relative to the turn's root and never lead out of it.
"""

from __future__ import annotations

import difflib
import os
import time
from dataclasses import dataclass, field

from openheim.checkpoints.store import CheckpointStore, TurnRecord, sha256_file
from openheim.errors import InvalidArgument, NotFound

DIFFSTAT_MAX_BYTES = 1 << 20


@dataclass(eq=False)
class UndoItem:
    """One file of an undo: ``action`` restore | remove, or skip when it cannot be restored."""

    root: str
    path: str
    action: str
    digest: str | None  # what to restore (restore only)
    mode: int | None
    conflict: bool = False  # changed since the turn: protected unless forced
    restorable: bool = True
    added: int = 0  # lines the undo adds back
    removed: int = 0  # lines the undo takes away

    @property
    def absolute(self) -> str:
        return os.path.join(self.root, self.path)


@dataclass(eq=False)
class UndoPlan:
    """What undoing ``turns`` would do."""

    session_id: str
    turns: list[TurnRecord]
    items: list[UndoItem] = field(default_factory=list)

    @property
    def conflicts(self) -> list[UndoItem]:
        return [i for i in self.items if i.conflict]

    @property
    def not_restorable(self) -> list[UndoItem]:
        return [i for i in self.items if not i.restorable]

    def diffstat(self) -> list[str]:
        """One line per file, as ``git diff --stat`` would show what the undo does."""
        lines = []
        for item in self.items:
            mark = "D" if item.action == "remove" else "M" if os.path.lexists(item.absolute) else "A"
            if not item.restorable:
                note = "  (not restorable: bigger than [checkpoints] max_file_bytes when the turn ran)"
            elif item.conflict:
                note = "  (changed since that turn: kept unless --force)"
            else:
                note = ""
            lines.append(f" {mark} {item.path} | +{item.added} -{item.removed}{note}")
        return lines


@dataclass(eq=False)
class UndoResult:
    """What an undo did."""

    turns: list[int]
    restored: list[str]
    removed: list[str]
    skipped: list[str]  # not restorable


def plan_undo(store: CheckpointStore, session_id: str, turns: int = 1) -> UndoPlan:
    """The undo of the session's last ``turns`` turns that changed files (and are not undone yet)."""
    if turns < 1:
        raise InvalidArgument("--turns must be at least 1")
    pending = [r for r in store.turns(session_id) if not r.undone]
    if not pending:
        raise NotFound(
            f"session {session_id} has no file changes to undo; only turns that changed files "
            "under the sandbox root can be undone"
        )
    chosen = pending[-turns:]
    plan = UndoPlan(session_id, chosen)
    merged: dict[tuple[str, str], UndoItem] = {}
    for record in reversed(chosen):  # latest first: its "after" is what the file must still hold
        manifest: dict[str, list] | None = None
        for change in record.changes:
            key = (record.root, change.path)
            item = merged.get(key)
            if item is None:
                item = UndoItem(record.root, change.path, "", None, None)
                item.conflict = _changed_since(item.absolute, change.kind, change.after)
                merged[key] = item
            if change.kind == "added":
                item.action, item.digest, item.restorable = "remove", None, True
            else:
                if manifest is None:
                    manifest = _manifest(store, record)
                row = manifest.get(change.path)
                item.action, item.digest = "restore", change.before
                item.mode = row[2] if row else None
                item.restorable = change.before is not None and store.has_blob(change.before)
    for item in sorted(merged.values(), key=lambda i: i.path):
        _count_lines(store, item)
        plan.items.append(item)
    return plan


def apply_undo(store: CheckpointStore, plan: UndoPlan, force: bool = False) -> UndoResult:
    """Restore the plan's files; InvalidArgument naming the protected files when there are conflicts."""
    conflicts = plan.conflicts
    if conflicts and not force:
        names = ", ".join(i.path for i in conflicts)
        raise InvalidArgument(
            f"not undone: {len(conflicts)} file(s) changed since that turn ({names}); "
            "re-run with --force to overwrite them"
        )
    result = UndoResult([r.turn for r in plan.turns], [], [], [])
    for item in plan.items:
        target = _inside(item.root, item.path)
        if not item.restorable:
            result.skipped.append(item.path)
        elif item.action == "remove":
            _remove(target, item.root)
            result.removed.append(item.path)
        else:
            assert item.digest is not None
            _restore(target, store.read_blob(item.digest), item.mode)
            result.restored.append(item.path)
    store.append_record(
        plan.session_id,
        {
            "type": "undo",
            "turns": result.turns,
            "created": time.time(),
            "restored": result.restored,
            "removed": result.removed,
            "skipped": result.skipped,
        },
    )
    return result


def _manifest(store: CheckpointStore, record: TurnRecord) -> dict[str, list]:
    try:
        return store.load_manifest(record.checkpoint)
    except (OSError, ValueError, KeyError):
        raise NotFound(
            f"the checkpoint taken before turn {record.turn} is gone (pruned or damaged); that turn cannot be undone"
        ) from None


def _changed_since(path: str, kind: str, after: str | None) -> bool:
    """Whether the file no longer is what the turn left: gone, back, or different content."""
    exists = os.path.isfile(path)
    if kind == "deleted":
        return exists or os.path.lexists(path)
    if not exists or after is None:
        return True
    try:
        return sha256_file(path) != after
    except OSError:
        return True


def _inside(root: str, rel: str) -> str:
    """The absolute path of ``rel`` under ``root``; InvalidArgument when it would lead out of the root."""
    if os.path.isabs(rel) or ".." in rel.split("/"):
        raise InvalidArgument(f"refusing to undo {rel!r}: it is not a path inside {root}")
    real_root = os.path.realpath(root)
    parent = os.path.realpath(os.path.dirname(os.path.join(real_root, rel)))
    if parent != real_root and not parent.startswith(real_root + os.sep):
        raise InvalidArgument(f"refusing to undo {rel!r}: it leads out of {root} through a symlink")
    return os.path.join(parent, os.path.basename(rel))


def _remove(target: str, root: str) -> None:
    try:
        os.unlink(target)
    except FileNotFoundError:
        pass
    real_root = os.path.realpath(root)
    parent = os.path.dirname(target)
    while parent.startswith(real_root + os.sep):  # directories left empty by the removal go too
        try:
            os.rmdir(parent)
        except OSError:
            break
        parent = os.path.dirname(parent)


def _restore(target: str, data: bytes, mode: int | None) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.islink(target):
        os.unlink(target)
    tmp = f"{target}.openheim-undo"
    with open(tmp, "wb") as f:
        f.write(data)
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, target)


def _count_lines(store: CheckpointStore, item: UndoItem) -> None:
    current = _read_small(item.absolute)
    wanted = (
        b""
        if item.action == "remove" or not item.restorable or item.digest is None
        else _blob_small(store, item.digest)
    )
    if current is None or wanted is None:
        return
    old, new = current.decode("utf-8", "replace").splitlines(), wanted.decode("utf-8", "replace").splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            item.removed += i2 - i1
        if tag in ("replace", "insert"):
            item.added += j2 - j1


def _read_small(path: str) -> bytes | None:
    try:
        if os.path.getsize(path) > DIFFSTAT_MAX_BYTES:
            return None
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _blob_small(store: CheckpointStore, digest: str) -> bytes | None:
    path = store.blob_path(digest)
    try:
        return None if path.stat().st_size > DIFFSTAT_MAX_BYTES else path.read_bytes()
    except OSError:
        return None
