"""Undo the file changes of a session's last turns: plan (what will be restored, what is protected), then apply.

A file is restored to what it was before the earliest undone turn; a file those turns added is removed. A file
that no longer holds what the latest undone turn left (the user changed it since) is a conflict: nothing is
written unless ``force``. Paths are relative to the turn's root and never lead out of it.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
import time
from dataclasses import dataclass, field

from openheim.checkpoints.store import Change, CheckpointStore, TurnRecord
from openheim.config.bounded_read import open_regular, read_at_most, read_bounded
from openheim.config.nofollow import open_subdir
from openheim.config.workspace_write import write_beneath
from openheim.errors import InvalidArgument, NotFound, OpenheimError

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
    did: str = "M"  # what the undone turns did to it: A (created), M (changed), D (deleted)
    too_big: bool = False  # over [checkpoints] max_file_bytes: no copy was taken
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
        """One line per file: what the turn did (A/M/D, as ``sessions show --changes`` shows it), the lines
        the undo adds and removes, and what the undo will do, in words."""
        return [
            f" {item.did} {item.path} | +{item.added} -{item.removed} | {what_undo_does(item)}" for item in self.items
        ]


def what_undo_does(item: UndoItem) -> str:
    """What undoing does to one file, in words."""
    if item.too_big:
        return "left as it is (too big to checkpoint: over [checkpoints] max_file_bytes when the turn ran)"
    if not item.restorable:
        return "left as it is (no copy of it was kept)"
    if item.action == "remove":
        words = f"remove {item.path} (the turn created it)"
    elif item.did == "D":
        words = f"bring back {item.path} (the turn deleted it)"
    else:
        words = f"restore {item.path} as it was before (the turn changed it)"
    return words + ("; it changed since that turn: kept unless --force" if item.conflict else "")


@dataclass(eq=False)
class UndoResult:
    """What an undo did."""

    turns: list[int]
    restored: list[str]
    removed: list[str]
    skipped: list[str]  # not restorable
    failed: list[str] = field(default_factory=list)  # "path: why" for each file the undo refused to write

    def summary(self) -> list[str]:
        """What the undo did: one line, then one per file it refused to write (every front end shows these)."""
        kept = f"; left as they were (no copy kept): {', '.join(self.skipped)}" if self.skipped else ""
        first = f"restored {len(self.restored)} file(s), removed {len(self.removed)}{kept}"
        return [first, *(f"not restored: {line}" for line in self.failed)]


_MARK = {"added": "A", "modified": "M", "deleted": "D"}


def _too_big(change: Change) -> bool:
    """No copy was taken because the file was over the size cap (an added file's after, a changed one's before)."""
    if change.kind == "added":
        return change.after is None
    return not change.restorable and change.before is None


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
                item = UndoItem(record.root, change.path, "", None, None, did=_MARK.get(change.kind, "M"))
                item.conflict = _changed_since(item.absolute, change.kind, change.after)
                merged[key] = item
            item.too_big = _too_big(change)
            if item.too_big:
                item.action, item.restorable, item.conflict = "keep", False, False
            elif change.kind == "added":
                item.action, item.digest, item.restorable = "remove", None, True
                item.did = "A"
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
        _apply_item(store, item, result)
    store.append_record(
        plan.session_id,
        {
            "type": "undo",
            "turns": result.turns,
            "created": time.time(),
            "restored": result.restored,
            "removed": result.removed,
            "skipped": result.skipped,
            "failed": result.failed,
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


def _apply_item(store: CheckpointStore, item: UndoItem, result: UndoResult) -> None:
    """Restore or remove one file through the workspace writer; a refusal is noted, the rest goes on."""
    rel = _inside(item.root, item.path)
    if not item.restorable:
        result.skipped.append(item.path)
        return
    try:
        if item.action == "remove":
            _remove(item.root, rel)
            result.removed.append(item.path)
        else:
            assert item.digest is not None
            write_beneath(item.root, rel, store.read_blob(item.digest), mode=item.mode, over_link=True)
            result.restored.append(item.path)
    except (OSError, OpenheimError) as e:
        why = getattr(e, "strerror", None) or str(e)
        result.failed.append(f"{item.path}: {why} (a symlink or special file on its path is never written through)")


def _changed_since(path: str, kind: str, after: str | None) -> bool:
    """Whether the file no longer is what the turn left: gone, back, a link or special file, or other content."""
    try:
        info = os.lstat(path)
    except OSError:
        return kind != "deleted"
    if kind == "deleted" or after is None or not stat.S_ISREG(info.st_mode):
        return True
    try:
        return _digest(path) != after
    except OSError:
        return True


def _digest(path: str) -> str:
    """The SHA-256 of a regular file, never following a link nor opening a FIFO."""
    digest = hashlib.sha256()
    fd = open_regular(path, follow=False)
    try:
        while chunk := read_at_most(fd, 1 << 20):
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def _inside(root: str, rel: str) -> str:
    """``rel`` checked to stay inside ``root``: InvalidArgument when it is absolute or climbs out.

    The writer then opens every directory below the root without following a symlink."""
    if os.path.isabs(rel) or ".." in rel.split("/") or not rel.strip("/"):
        raise InvalidArgument(f"refusing to undo {rel!r}: it is not a path inside {root}")
    return rel


def _remove(root: str, rel: str) -> None:
    """Unlink ``rel`` relative to its directory's descriptor (the entry itself, never what a link points
    to), then the directories the removal left empty."""
    parts = rel.split("/")
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        parent = open_subdir(root_fd, "/".join(parts[:-1]))
        try:
            os.unlink(parts[-1], dir_fd=parent)
        except FileNotFoundError:
            pass
        finally:
            os.close(parent)
        for depth in range(len(parts) - 1, 0, -1):  # directories left empty by the removal go too
            try:
                os.rmdir("/".join(parts[:depth]), dir_fd=root_fd)
            except OSError:
                break
    finally:
        os.close(root_fd)


def _count_lines(store: CheckpointStore, item: UndoItem) -> None:
    if not item.restorable:
        return
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
        return read_bounded(path, DIFFSTAT_MAX_BYTES, follow=False)
    except FileNotFoundError:
        return b""
    except OSError:  # too big, a link, a FIFO or a device: no line counts
        return None


def _blob_small(store: CheckpointStore, digest: str) -> bytes | None:
    try:
        return read_bounded(store.blob_path(digest), DIFFSTAT_MAX_BYTES)
    except OSError:  # gone, or too big to count lines of
        return None
