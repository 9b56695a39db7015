"""The cross-process write lease of a conversation: ``{id}.lock`` naming the pid and host that own it.

Semantics (the reference's): the first claim is an exclusive create; our own lease (same pid and host) is
refreshed, so acquiring is re-entrant; on the same host a lease whose process is gone (dead pid, or a pid
recycled by another process, told apart by its start time) is taken over; across hosts a lease is stale 30
minutes after the file was last written; an unreadable lock file is treated as being written for 10 seconds,
then taken over. Refreshes and takeovers write a unique temp file and rename it into place, one process at a
time: each holds an exclusive ``flock`` on ``.lease-guard`` in the same directory while it re-reads the lock file,
decides and replaces it, so two processes can never both take over the same dead holder's lease (POSIX only;
the guard is released by the kernel if its holder dies). Releasing deletes the file only if it still names us.
The lease is held for one prompt turn; loading and listing never take it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from openheim.config.private_data import FILE_MODE, make_private, open_private
from openheim.conversation.history import validate_id
from openheim.errors import SessionLocked, file_error

log = logging.getLogger(__name__)

STALE_AFTER_SECS = 30 * 60
CORRUPT_GRACE_SECS = 10.0
GUARD_NAME = ".lease-guard"
_ATTEMPTS = 8


def hostname() -> str:
    """This machine's host name, or "unknown-host"."""
    try:
        return socket.gethostname() or "unknown-host"
    except OSError:
        return "unknown-host"


def process_start(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (Linux /proc), or None where unavailable."""
    stat = _proc_stat(pid)
    if stat is None:
        return None
    try:
        return int(stat[19])
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int, started: int | None = None) -> bool | None:
    """Whether ``pid`` runs and, when ``started`` is known, is still the same process; None when unknowable."""
    if os.name != "posix":
        return None  # no safe probe (os.kill would terminate the process on Windows): use staleness
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    except OSError:
        return None
    stat = _proc_stat(pid)
    if stat is None:
        return True
    if stat[0] == "Z":
        return False
    return started is None or process_start(pid) in (None, started)


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    close = raw.rfind(")")
    return raw[close + 2 :].split() if close >= 0 else None


@dataclass
class LeaseRecord:
    """The lock file's contents."""

    pid: int
    hostname: str
    acquired_at: str
    process_start: int | None = None

    def to_json(self) -> str:
        return (
            json.dumps(
                {
                    "pid": self.pid,
                    "hostname": self.hostname,
                    "acquired_at": self.acquired_at,
                    "process_start": self.process_start,
                },
                indent=2,
            )
            + "\n"
        )

    @classmethod
    def parse(cls, data: bytes) -> LeaseRecord | None:
        """The record in ``data``, or None when it is not a valid lock file."""
        try:
            d = json.loads(data)
            pid, host = d["pid"], d["hostname"]
            start = d.get("process_start")
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        if not isinstance(pid, int) or not isinstance(host, str) or not (start is None or isinstance(start, int)):
            return None
        return cls(pid, host, str(d.get("acquired_at", "")), start)


@dataclass(eq=False)
class LeasePolicy:
    """Who we are and the clock and thresholds we judge other holders by (injectable for tests)."""

    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=hostname)
    clock: Callable[[], float] = time.time
    stale_after: float = STALE_AFTER_SECS
    corrupt_grace: float = CORRUPT_GRACE_SECS
    is_alive: Callable[[int, int | None], bool | None] = pid_alive


class Lease:
    """A held lease; use as a context manager or call ``release()``."""

    def __init__(self, path: Path, session_id: str, record: LeaseRecord) -> None:
        self.path, self.session_id, self.record = path, session_id, record
        self._held = True

    @classmethod
    def acquire(cls, history_dir: Path | str, session_id: str, policy: LeasePolicy | None = None) -> Lease:
        """Take the lease of ``session_id`` or raise SessionLocked naming the holder."""
        policy = policy or LeasePolicy()
        path = Path(history_dir) / f"{validate_id(session_id)}.lock"
        try:
            make_private(path.parent)
        except OSError as e:
            raise file_error(e, "create directory", None if e.filename else path.parent) from None
        mine = _record_for(policy)
        try:
            for _ in range(_ATTEMPTS):
                if _create_exclusive(path, mine):
                    return cls(path, session_id, mine)
                if _claim_existing(path, session_id, mine, policy):
                    return cls(path, session_id, mine)
        except OSError as e:
            raise file_error(e, "write the lock file", path) from None
        raise SessionLocked(session_id, 0, "unknown")

    @property
    def held(self) -> bool:
        return self._held

    def refresh(self) -> None:
        """Touch the lock file (keeps a long turn from looking stale to other hosts) if it still names us."""
        try:
            if self._held and LeaseRecord.parse(self.path.read_bytes()) == self.record:
                os.utime(self.path)
        except OSError as e:
            log.warning("could not refresh the lease %s: %s", self.path, e)

    def release(self) -> None:
        """Delete the lock file if it still names us; safe to call twice."""
        if not self._held:
            return
        self._held = False
        try:
            current = LeaseRecord.parse(self.path.read_bytes())
            if current == self.record:
                self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("could not release the lease %s: %s", self.path, e)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _record_for(policy: LeasePolicy) -> LeaseRecord:
    stamp = datetime.fromtimestamp(policy.clock(), UTC).isoformat(timespec="microseconds")
    start = process_start(policy.pid) if policy.pid == os.getpid() else None
    return LeaseRecord(policy.pid, policy.host, stamp.replace("+00:00", "Z"), start)


def _create_exclusive(path: Path, record: LeaseRecord) -> bool:
    """The first claim: create the file only if nobody has one; False when it exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.write(fd, record.to_json().encode("utf-8"))  # no fsync: a lease need not outlive a power cut
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)
    return True


def _claim_existing(path: Path, session_id: str, mine: LeaseRecord, policy: LeasePolicy) -> bool:
    """Decide about an existing lock file: True once it names us, False to retry, else SessionLocked."""
    with _takeover_guard(path.parent):
        return _claim_guarded(path, session_id, mine, policy)


@contextmanager
def _takeover_guard(directory: Path) -> Iterator[None]:
    """Hold the directory's takeover guard: an exclusive flock, released on exit or when the process dies."""
    try:
        import fcntl
    except ImportError:  # not POSIX: takeovers are not serialised
        yield
        return
    fd = os.open(directory / GUARD_NAME, os.O_RDONLY | os.O_CREAT, FILE_MODE)  # flock needs no write access
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _claim_guarded(path: Path, session_id: str, mine: LeaseRecord, policy: LeasePolicy) -> bool:
    try:
        data = path.read_bytes()
        age = policy.clock() - path.stat().st_mtime
    except FileNotFoundError:
        return False  # released meanwhile: try the exclusive create again
    holder = LeaseRecord.parse(data)
    if holder is None:
        if age < policy.corrupt_grace:
            raise SessionLocked(session_id, 0, "unknown")
        log.warning("taking over the unreadable lock file %s", path)
    elif not _ours_to_take(holder, mine, age, policy):
        raise SessionLocked(session_id, holder.pid, holder.hostname)
    _replace(path, mine)
    try:
        return LeaseRecord.parse(path.read_bytes()) == mine
    except FileNotFoundError:
        return False


def _ours_to_take(holder: LeaseRecord, mine: LeaseRecord, age: float, policy: LeasePolicy) -> bool:
    """Our own lease, a dead holder on this host, or (when liveness is unknowable) a stale file."""
    if holder.hostname == mine.hostname:
        if holder.pid == mine.pid:
            return True
        alive = policy.is_alive(holder.pid, holder.process_start)
        if alive is not None:
            return not alive
    return age >= policy.stale_after


def _replace(path: Path, record: LeaseRecord) -> None:
    """Refresh or take over: write a unique temp file and rename it over the lock file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open_private(tmp) as f:
            f.write(record.to_json().encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
