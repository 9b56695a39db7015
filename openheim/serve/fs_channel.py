"""The `fs` channel of `/ws`: watch, list, read, write, mkdir, delete and rename files under the work dir.

Every path goes through the file tools' sandbox (``validate_path``; ``validate_entry`` for delete and
rename), so the channel reaches exactly what the agent's file tools reach. A request is
``{action, ..., id?}``; its reply carries the same ``id``; a failure is ``{type: "error", message}``.
"""
from __future__ import annotations

import logging
import os
import shutil
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openheim.errors import OpenheimError
from openheim.tools.sandbox import validate_entry, validate_path

log = logging.getLogger(__name__)

ACTIONS = ("watch", "unwatch", "list", "read", "write", "mkdir", "delete", "rename")
MAX_READ_BYTES = 16 * 1024 * 1024
MAX_ENTRIES = 50_000  # per list, and per watched tree
WATCH_INTERVAL = 1.0

Send = Callable[[dict], None]


class FsError(Exception):
    """A request that failed; its message is what the client sees."""


def _field(payload: dict, name: str) -> str:
    value = payload.get(name)
    if value is None:
        raise FsError(f"Invalid payload: missing field `{name}`")
    if not isinstance(value, str):
        raise FsError(f"Invalid payload: field `{name}` must be a string")
    return value


def _why(error: OSError) -> str:
    return error.strerror or str(error)


class FsChannel:
    """One socket's fs channel: requests are answered on the caller's thread, watch events on a poller's."""

    def __init__(self, root: Path, send: Send, interval: float = WATCH_INTERVAL) -> None:
        self.root = root
        self.send = send
        self.interval = interval
        self._watcher: Watcher | None = None
        self._lock = threading.Lock()
        self._actions = {"watch": self._start_watch, "unwatch": self._unwatch, "list": self._list,
                         "read": self._read, "write": self._write, "mkdir": self._mkdir, "delete": self._delete,
                         "rename": self._rename}

    def handle(self, payload: Any) -> None:
        """Answer one request (any ``id`` it carries is echoed)."""
        try:
            reply = self._dispatch(payload)
        except (FsError, OpenheimError) as e:  # OpenheimError: the sandbox's refusals, in its own words
            reply = {"type": "error", "message": str(e)}
        except Exception as e:  # a bug must cost one request, not the socket
            log.exception("fs request failed")
            reply = {"type": "error", "message": f"Failed: {type(e).__name__}: {e}"}
        if isinstance(payload, dict) and "id" in payload:
            reply["id"] = payload["id"]
        self.send(reply)

    def close(self) -> None:
        self._stop_watch()

    # --- requests ------------------------------------------------------------------

    def _dispatch(self, payload: Any) -> dict:
        if not isinstance(payload, dict):
            raise FsError("Invalid payload: expected an object with an `action` field")
        action = payload.get("action")
        if action is None:
            raise FsError("Invalid payload: missing field `action`")
        if not isinstance(action, str) or action not in ACTIONS:
            raise FsError(f"Invalid payload: unknown action `{action}`, expected one of "
                          + ", ".join(f"`{a}`" for a in ACTIONS))
        return self._actions[action](payload)

    def _path(self, text: str) -> Path:
        return validate_path(text, self.root)

    def _list(self, payload: dict) -> dict:
        text = _field(payload, "path")
        recursive = payload.get("recursive", False)
        if not isinstance(recursive, bool):
            raise FsError("Invalid payload: field `recursive` must be true or false")
        path = self._path(text)
        if not path.is_dir():
            raise FsError(f"Failed to list: '{text}' is not a directory")
        try:
            entries = list_entries(path, recursive)
        except OSError as e:
            raise FsError(f"Failed to list: {_why(e)}") from None
        return {"type": "file_list", "path": text, "entries": entries}

    def _read(self, payload: dict) -> dict:
        text = _field(payload, "path")
        return {"type": "file_content", "path": text, "content": read_text(self._path(text), text)}

    def _write(self, payload: dict) -> dict:
        text = _field(payload, "path")
        content = _field(payload, "content")
        write_text(self._path(text), content)
        return {"type": "write_success", "path": text}

    def _mkdir(self, payload: dict) -> dict:
        text = _field(payload, "path")
        try:
            self._path(text).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise FsError(f"Failed to mkdir: {_why(e)}") from None
        return {"type": "mkdir_success", "path": text}

    def _delete(self, payload: dict) -> dict:
        text = _field(payload, "path")
        delete(validate_entry(text, self.root))
        return {"type": "delete_success", "path": text}

    def _rename(self, payload: dict) -> dict:
        source, target = _field(payload, "from"), _field(payload, "to")
        old, new = validate_entry(source, self.root), validate_entry(target, self.root)
        try:
            os.rename(old, new)
        except OSError as e:
            raise FsError(f"Failed to rename: {_why(e)}") from None
        return {"type": "rename_success", "from": source, "to": target}

    # --- watching ------------------------------------------------------------------

    def _start_watch(self, payload: dict) -> dict:
        text = _field(payload, "path")
        path = self._path(text)
        if not path.is_dir():
            raise FsError(f"Invalid directory: {text}")
        watcher = Watcher(path, self.send, self.interval)
        with self._lock:
            old, self._watcher = self._watcher, watcher
        if old is not None:
            old.stop()
        watcher.start()
        return {"type": "watching", "path": text}

    def _unwatch(self, payload: dict) -> dict:
        self._stop_watch()
        return {"type": "unwatched"}

    def _stop_watch(self) -> None:
        with self._lock:
            old, self._watcher = self._watcher, None
        if old is not None:
            old.stop()


def list_entries(path: Path, recursive: bool) -> list[dict]:
    """The entries under ``path`` (not following symlinks), sorted by path; the root itself excluded."""
    entries: list[dict] = []
    pending = [str(path)]
    while pending:
        with os.scandir(pending.pop()) as it:
            for entry in it:
                info = entry.stat(follow_symlinks=False)
                is_dir = stat.S_ISDIR(info.st_mode)
                item: dict = {"path": entry.path, "name": entry.name, "is_dir": is_dir,
                              "modified": int(info.st_mtime)}
                if stat.S_ISLNK(info.st_mode):
                    item["is_symlink"] = True
                elif not is_dir:
                    item["size"] = info.st_size
                entries.append(item)
                if len(entries) > MAX_ENTRIES:
                    raise FsError(f"Failed to list: more than {MAX_ENTRIES} entries; list a subdirectory")
                if recursive and is_dir:
                    pending.append(entry.path)
    entries.sort(key=lambda e: e["path"])
    return entries


def read_text(path: Path, shown: str) -> str:
    """A regular file's text (UTF-8, at most MAX_READ_BYTES)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise FsError(f"Failed to read: {_why(e)}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FsError(f"Failed to read: '{shown}' is not a regular file")
    with open(fd, "rb") as f:
        data = f.read(MAX_READ_BYTES + 1)
    if len(data) > MAX_READ_BYTES:
        raise FsError(f"Failed to read: '{shown}' is larger than {MAX_READ_BYTES // (1024 * 1024)} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FsError(f"Failed to read: '{shown}' is not UTF-8 text") from None


def write_text(path: Path, content: str) -> None:
    """Create or replace a file (and its missing parents), refusing links swapped in and FIFOs."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FsError(f"Failed to create dirs: {_why(e)}") from None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     0o666)
        with open(fd, "w", encoding="utf-8", newline="") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FsError("Failed to write: not a regular file")
            f.write(content)
    except OSError as e:
        raise FsError(f"Failed to write: {_why(e)}") from None


def delete(path: Path) -> None:
    """Remove a file or link (the link itself), or a directory with everything in it."""
    try:
        info = path.lstat()
    except OSError as e:
        raise FsError(f"Failed to delete: {_why(e)}") from None
    if stat.S_ISDIR(info.st_mode):
        try:
            shutil.rmtree(path)
        except OSError as e:
            raise FsError(f"Failed to delete dir: {_why(e)}") from None
        return
    try:
        path.unlink()
    except OSError as e:
        raise FsError(f"Failed to delete file: {_why(e)}") from None


def snapshot(root: Path) -> tuple[dict[str, tuple], bool]:
    """(path → (is_dir, size, mtime_ns)) for the tree under ``root``, and whether it was cut at MAX_ENTRIES."""
    seen: dict[str, tuple] = {}
    pending = [str(root)]
    while pending:
        try:
            it = os.scandir(pending.pop())
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                is_dir = stat.S_ISDIR(info.st_mode)
                seen[entry.path] = (is_dir, 0 if is_dir else info.st_size, info.st_mtime_ns)
                if len(seen) >= MAX_ENTRIES:
                    return seen, True
                if is_dir:
                    pending.append(entry.path)
    return seen, False


def changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[tuple[str, list[str]]]:
    """(event_kind, paths) for what was created, modified and removed between two snapshots."""
    created = sorted(p for p in after if p not in before)
    removed = sorted(p for p in before if p not in after)
    modified = sorted(p for p, v in after.items() if p in before and before[p] != v and not v[0])
    return [(kind, paths) for kind, paths in (("create", created), ("modify", modified), ("remove", removed))
            if paths]


class Watcher:
    """Polls a tree every ``interval`` seconds and sends ``fs_event`` messages for what changed."""

    def __init__(self, root: Path, send: Send, interval: float) -> None:
        self.root, self.send, self.interval = root, send, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fs-watch", daemon=True)
        self._state, cut = snapshot(root)
        self._warned = False
        self._warn_if(cut)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _warn_if(self, cut: bool) -> None:
        if cut and not self._warned:
            self._warned = True
            self.send({"type": "error", "message": f"Watcher error: more than {MAX_ENTRIES} entries; "
                                                   "changes beyond them are not reported (watch a subdirectory)"})

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                state, cut = snapshot(self.root)
            except Exception as e:  # never let the poller die silently
                log.warning("fs watcher failed: %s", e)
                self.send({"type": "error", "message": f"Watcher error: {e}"})
                return
            self._warn_if(cut)
            for kind, paths in changes(self._state, state):
                self.send({"type": "fs_event", "event_kind": kind, "paths": paths})
            self._state = state
