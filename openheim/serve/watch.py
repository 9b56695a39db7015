"""Walking and watching a tree under the work dir for the `fs` channel of `/ws`.

``walk`` visits a directory's entries through descriptors, descending only through real subdirectories
(O_NOFOLLOW), never into a private one. Watching is polling: one ``Poller`` per watched tree scans it every
``interval`` seconds and sends ``fs_event`` messages to every socket subscribed to it (``WatchHub``).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable

from openheim.errors import OpenheimError
from openheim.tools.sandbox import is_private, open_dir

log = logging.getLogger(__name__)

MAX_ENTRIES = 50_000  # per list, and per watched tree
WATCH_INTERVAL = 1.0
_SUBDIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Send = Callable[[dict], None]


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
