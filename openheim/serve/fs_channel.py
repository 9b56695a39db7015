"""The `fs` channel of `/ws`: watch, list, read, write, mkdir, delete and rename files under the work dir.

Every path is checked as the file tools check theirs (``validate_path``; ``validate_entry`` for delete
and rename: inside the root, never the data dir) and then opened as they open theirs: the directories
on the way without following a symlink at any component (openat2 where the kernel has it, else one
O_NOFOLLOW step per component), and every change made relative to the descriptor of its directory. A
directory swapped for a symlink between the check and the change is refused, never followed. A file
is replaced (written beside it, renamed over it), so a hard link to it elsewhere keeps its old content.

A request is ``{action, ..., id?}``; its reply carries the same ``id``; a failure is
``{type: "error", message}``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import threading
from pathlib import Path
from typing import Any

from openheim.config.workspace_write import replace_at
from openheim.errors import OpenheimError
from openheim.serve.watch import MAX_ENTRIES, WATCH_INTERVAL, Send, Subscription, WatchHub, walk
from openheim.tools.sandbox import canonical_root, open_dir, open_file, validate_entry, validate_path

log = logging.getLogger(__name__)

ACTIONS = ("watch", "unwatch", "list", "read", "write", "mkdir", "delete", "rename")
MAX_FILE_BYTES = 16 * 1024 * 1024  # the largest file read or written (configurable: [serve] max_file_bytes)


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


def echoable(value: Any) -> bool:
    """Whether ``value`` can be written back as strict JSON (no NaN or infinity, not absurdly deep)."""
    try:
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return False
    return True


class FsChannel:
    """One socket's fs channel: requests are answered on the caller's thread, watch events on a poller's.

    ``hub`` shares one poller per watched tree among every socket watching it (a private hub otherwise).
    """

    def __init__(
        self,
        root: Path,
        send: Send,
        interval: float = WATCH_INTERVAL,
        hub: WatchHub | None = None,
        max_file_bytes: int = MAX_FILE_BYTES,
    ) -> None:
        self.root = root
        self.send = send
        self.hub = hub if hub is not None else WatchHub(interval)
        self.max_file_bytes = max_file_bytes
        self._watch: Subscription | None = None
        self._lock = threading.Lock()
        self._actions = {
            "watch": self._start_watch,
            "unwatch": self._unwatch,
            "list": self._list,
            "read": self._read,
            "write": self._write,
            "mkdir": self._mkdir,
            "delete": self._delete,
            "rename": self._rename,
        }

    def handle(self, payload: Any) -> None:
        """Answer one request (any ``id`` it carries is echoed, when it can be written as JSON)."""
        try:
            reply = self._dispatch(payload)
        except (FsError, OpenheimError) as e:  # OpenheimError: the sandbox's refusals, in its own words
            reply = {"type": "error", "message": str(e)}
        except Exception as e:  # a bug must cost one request, not the socket
            log.exception("fs request failed")
            reply = {"type": "error", "message": f"Failed: {type(e).__name__}: {e}"}
        if isinstance(payload, dict) and "id" in payload:
            if echoable(payload["id"]):
                reply["id"] = payload["id"]
            else:
                reply = {
                    "type": "error",
                    "message": "Invalid payload: `id` must be a string, a finite number or other plain JSON",
                    "id": None,
                }
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
            raise FsError(
                f"Invalid payload: unknown action `{action}`, expected one of " + ", ".join(f"`{a}`" for a in ACTIONS)
            )
        return self._actions[action](payload)

    def _path(self, text: str) -> Path:
        return validate_path(text, self.root)

    def _list(self, payload: dict) -> dict:
        text = _field(payload, "path")
        recursive = payload.get("recursive", False)
        if not isinstance(recursive, bool):
            raise FsError("Invalid payload: field `recursive` must be true or false")
        path = self._path(text)
        try:
            fd = open_dir(path, listing=True)
        except NotADirectoryError:
            raise FsError(f"Failed to list: '{text}' is not a directory") from None
        except OSError as e:
            raise FsError(f"Failed to list: {_why(e)}") from None
        entries: list[dict] = []
        walk(fd, str(path), recursive, lambda item: _collect(entries, item), canonical_root(self.root))
        entries.sort(key=lambda e: e["path"])
        return {"type": "file_list", "path": text, "entries": entries}

    def _read(self, payload: dict) -> dict:
        text = _field(payload, "path")
        return {"type": "file_content", "path": text, "content": read_text(self._path(text), text, self.max_file_bytes)}

    def _write(self, payload: dict) -> dict:
        text = _field(payload, "path")
        content = _field(payload, "content")
        write_text(self._path(text), content, self.max_file_bytes)
        return {"type": "write_success", "path": text}

    def _mkdir(self, payload: dict) -> dict:
        text = _field(payload, "path")
        path = self._path(text)
        try:
            parent = open_dir(path.parent, create=True)
            try:
                os.mkdir(path.name, 0o777, dir_fd=parent)
            except FileExistsError:
                if not stat.S_ISDIR(os.stat(path.name, dir_fd=parent, follow_symlinks=False).st_mode):
                    raise
            finally:
                os.close(parent)
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
            old_dir = open_dir(old.parent)
            try:
                new_dir = open_dir(new.parent)
                try:
                    os.rename(old.name, new.name, src_dir_fd=old_dir, dst_dir_fd=new_dir)
                finally:
                    os.close(new_dir)
            finally:
                os.close(old_dir)
        except OSError as e:
            raise FsError(f"Failed to rename: {_why(e)}") from None
        return {"type": "rename_success", "from": source, "to": target}

    # --- watching ------------------------------------------------------------------

    def _start_watch(self, payload: dict) -> dict:
        text = _field(payload, "path")
        path = self._path(text)
        try:
            os.close(open_dir(path, listing=True))
        except OSError:
            raise FsError(f"Invalid directory: {text}") from None
        subscription = self.hub.subscribe(str(path), self.send)
        with self._lock:
            old, self._watch = self._watch, subscription
        if old is not None:
            old.cancel()
        return {"type": "watching", "path": text}

    def _unwatch(self, payload: dict) -> dict:
        self._stop_watch()
        return {"type": "unwatched"}

    def _stop_watch(self) -> None:
        with self._lock:
            old, self._watch = self._watch, None
        if old is not None:
            old.cancel()


# --- the operations, each through descriptors -----------------------------------------------


def _collect(entries: list[dict], found: tuple[str, str, os.stat_result]) -> bool:
    path, name, info = found
    is_dir = stat.S_ISDIR(info.st_mode)
    item: dict = {"path": path, "name": name, "is_dir": is_dir, "modified": int(info.st_mtime)}
    if stat.S_ISLNK(info.st_mode):
        item["is_symlink"] = True
    elif not is_dir:
        item["size"] = info.st_size
    entries.append(item)
    if len(entries) > MAX_ENTRIES:
        raise FsError(f"Failed to list: more than {MAX_ENTRIES} entries; list a subdirectory")
    return True


def read_text(path: Path, shown: str, limit: int = MAX_FILE_BYTES) -> str:
    """A regular file's text (UTF-8, at most ``limit`` bytes)."""
    try:
        fd = open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise FsError(f"Failed to read: {_why(e)}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FsError(f"Failed to read: '{shown}' is not a regular file")
    with open(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FsError(f"Failed to read: '{shown}' is larger than {_size(limit)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FsError(f"Failed to read: '{shown}' is not UTF-8 text") from None


def write_text(path: Path, content: str, limit: int = MAX_FILE_BYTES) -> None:
    """Create or replace a file (and its missing parents): a new file renamed over the old one, so a
    hard link elsewhere is never written through; links swapped in and FIFOs are refused."""
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise FsError("Failed to write: the content is not valid Unicode text") from None
    if len(data) > limit:
        raise FsError(f"Failed to write: the content is larger than {_size(limit)}")
    try:
        parent = open_dir(path.parent, create=True)
    except OSError as e:
        raise FsError(f"Failed to create dirs: {_why(e)}") from None
    try:
        replace_at(parent, path.name, data)
    except IsADirectoryError:
        raise FsError("Failed to write: Is a directory") from None
    except OSError as e:
        raise FsError(f"Failed to write: {_why(e)}") from None
    finally:
        os.close(parent)


def delete(path: Path) -> None:
    """Remove a file or link (the link itself), or a directory with everything in it, all relative to
    the descriptor of its parent (shutil.rmtree with dir_fd never follows a link it meets)."""
    try:
        parent = open_dir(path.parent)
    except OSError as e:
        raise FsError(f"Failed to delete: {_why(e)}") from None
    try:
        try:
            info = os.stat(path.name, dir_fd=parent, follow_symlinks=False)
        except OSError as e:
            raise FsError(f"Failed to delete: {_why(e)}") from None
        if stat.S_ISDIR(info.st_mode):
            try:
                shutil.rmtree(path.name, dir_fd=parent)
            except OSError as e:
                raise FsError(f"Failed to delete dir: {_why(e)}") from None
            return
        try:
            os.unlink(path.name, dir_fd=parent)
        except OSError as e:
            raise FsError(f"Failed to delete file: {_why(e)}") from None
    finally:
        os.close(parent)


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"
