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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openheim.errors import OpenheimError
from openheim.tools.sandbox import canonical_root, is_private, open_dir, open_file, validate_entry, validate_path
from openheim.tools.write_file import replace_file

log = logging.getLogger(__name__)

ACTIONS = ("watch", "unwatch", "list", "read", "write", "mkdir", "delete", "rename")
MAX_FILE_BYTES = 16 * 1024 * 1024  # the largest file read or written (configurable: [serve] max_file_bytes)
MAX_ENTRIES = 50_000  # per list, and per watched tree
WATCH_INTERVAL = 1.0
_SUBDIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

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


def walk(
    fd: int, path: str, recursive: bool, visit: Callable[[tuple[str, str, os.stat_result]], bool], root: str
) -> bool:
    """Call ``visit((path, name, lstat))`` for each entry under directory descriptor ``fd`` (closed here),
    descending (with ``recursive``) only through real subdirectories opened with O_NOFOLLOW, never into a
    private one (seen from sandbox ``root``). ``visit`` returns False to stop; so does walk."""
    pending = [(fd, path)]
    try:
        while pending:
            fd, path = pending.pop()
            try:
                if not _visit_dir(fd, path, recursive, visit, pending, root):
                    return False
            finally:
                os.close(fd)
        return True
    finally:
        for fd, _ in pending:
            os.close(fd)


def _visit_dir(
    fd: int,
    path: str,
    recursive: bool,
    visit: Callable[[tuple[str, str, os.stat_result]], bool],
    pending: list[tuple[int, str]],
    root: str,
) -> bool:
    try:
        with os.scandir(fd) as it:
            entries = list(it)
    except OSError:
        return True
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        child = os.path.join(path, entry.name)
        if not visit((child, entry.name, info)):
            return False
        if recursive and stat.S_ISDIR(info.st_mode) and not is_private(child, root):
            try:
                pending.append((os.open(entry.name, _SUBDIR, dir_fd=fd), child))
            except OSError:
                pass
    return True


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
        replace_file(parent, path.name, data, path)
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


# --- watching: one poller per tree, shared by every socket watching it ------------------------------


def snapshot(root: str, top: str | None = None) -> tuple[dict[str, tuple], bool]:
    """(path → (is_dir, size, mtime_ns)) for the tree under ``root`` and whether it was cut at MAX_ENTRIES.

    The tree is opened as the fs requests open theirs: a root that is no longer a directory inside the
    work dir (e.g. swapped for a symlink) is an empty tree, and no link below it is followed. ``top`` is the
    sandbox root (default ``root``), for what is private below it.
    """
    seen: dict[str, tuple] = {}
    try:
        fd = open_dir(root, listing=True)
    except (OSError, OpenheimError):
        return seen, False

    def add(found: tuple[str, str, os.stat_result]) -> bool:
        path, _, info = found
        is_dir = stat.S_ISDIR(info.st_mode)
        seen[path] = (is_dir, 0 if is_dir else info.st_size, info.st_mtime_ns)
        return len(seen) < MAX_ENTRIES

    complete = walk(fd, root, True, add, top or root)
    return seen, not complete


def changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[tuple[str, list[str]]]:
    """(event_kind, paths) for what was created, modified and removed between two snapshots."""
    created = sorted(p for p in after if p not in before)
    removed = sorted(p for p in before if p not in after)
    modified = sorted(p for p, v in after.items() if p in before and before[p] != v and not v[0])
    return [(kind, paths) for kind, paths in (("create", created), ("modify", modified), ("remove", removed)) if paths]


class Subscription:
    """One socket's watch of one tree."""

    def __init__(self, poller: Poller, send: Send) -> None:
        self.poller, self.send = poller, send
        self.warned = False

    def cancel(self) -> None:
        self.poller.leave(self)


class WatchHub:
    """The pollers of the watched trees: the first watch of a tree starts one, the last to leave stops it."""

    def __init__(self, interval: float = WATCH_INTERVAL) -> None:
        self.interval = interval
        self._pollers: dict[str, Poller] = {}
        self._lock = threading.Lock()

    def subscribe(self, root: str, send: Send) -> Subscription:
        with self._lock:
            poller = self._pollers.get(root)
            if poller is None or poller.stopped:
                poller = self._pollers[root] = Poller(self, root, self.interval)
            subscription = poller.join(send)
        return subscription

    def pollers(self) -> int:
        with self._lock:
            return len(self._pollers)

    def forget(self, poller: Poller) -> None:
        with self._lock:
            if self._pollers.get(poller.root) is poller:
                del self._pollers[poller.root]


class Poller:
    """Scans one tree every ``interval`` seconds and sends ``fs_event`` messages to its subscribers."""

    def __init__(self, hub: WatchHub, root: str, interval: float) -> None:
        self.hub, self.root, self.interval = hub, root, interval
        self.subscribers: list[Subscription] = []
        self.stopped = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._state, self._cut = snapshot(root)
        self._thread = threading.Thread(target=self._run, name="fs-watch", daemon=True)
        self._thread.start()

    def join(self, send: Send) -> Subscription:
        subscription = Subscription(self, send)
        with self._lock:
            self.subscribers.append(subscription)
        self._warn_if(self._cut, [subscription])
        return subscription

    def leave(self, subscription: Subscription) -> None:
        with self._lock:
            if subscription in self.subscribers:
                self.subscribers.remove(subscription)
            last = not self.subscribers
            if last:
                self.stopped = True
        if last:
            self._stop.set()
            self.hub.forget(self)

    def _warn_if(self, cut: bool, subscribers: list[Subscription]) -> None:
        if not cut:
            return
        for subscription in subscribers:
            if not subscription.warned:
                subscription.warned = True
                subscription.send(
                    {
                        "type": "error",
                        "message": f"Watcher error: more than {MAX_ENTRIES} entries; "
                        "changes beyond them are not reported (watch a subdirectory)",
                    }
                )

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                state, cut = snapshot(self.root)
            except Exception as e:  # never let the poller die silently
                log.warning("fs watcher failed: %s", e)
                self._broadcast({"type": "error", "message": f"Watcher error: {e}"})
                self.stopped = True  # the next watch of this tree starts a new poller
                self.hub.forget(self)
                return
            with self._lock:
                subscribers = list(self.subscribers)
            self._warn_if(cut, subscribers)
            for kind, paths in changes(self._state, state):
                self._broadcast({"type": "fs_event", "event_kind": kind, "paths": paths}, subscribers)
            self._state = state

    def _broadcast(self, message: dict, subscribers: list[Subscription] | None = None) -> None:
        if subscribers is None:
            with self._lock:
                subscribers = list(self.subscribers)
        for subscription in subscribers:
            subscription.send(dict(message))
