"""The session lease: exclusive claim, re-entrancy, dead/recycled pids, staleness, corrupt files, two processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openheim.conversation.lease import (
    CORRUPT_GRACE_SECS,
    STALE_AFTER_SECS,
    Lease,
    LeasePolicy,
    LeaseRecord,
    hostname,
    pid_alive,
    process_start,
)
from openheim.errors import SessionLocked

ROOT = Path(__file__).resolve().parents[2]
SID = "0b5e1c3a-94c6-4c1e-9a53-0f6f9d2f5e11"


def _lock(tmp_path: Path) -> Path:
    return tmp_path / f"{SID}.lock"


def _write_holder(path: Path, pid: int, host: str, start: int | None = None, age: float = 0.0) -> None:
    path.write_text(LeaseRecord(pid, host, "2026-01-01T00:00:00.000000Z", start).to_json())
    _age(path, age)


def _age(path: Path, seconds: float) -> None:
    mtime = path.stat().st_mtime - seconds
    os.utime(path, (mtime, mtime))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_first_claim_writes_the_record_and_release_deletes(tmp_path: Path) -> None:
    with Lease.acquire(tmp_path, SID) as lease:
        doc = json.loads(_lock(tmp_path).read_text())
        assert set(doc) == {"pid", "hostname", "acquired_at", "process_start"}
        assert (doc["pid"], doc["hostname"]) == (os.getpid(), hostname())
        assert doc["acquired_at"].endswith("Z")
        if Path("/proc/self/stat").exists():
            assert doc["process_start"] == process_start(os.getpid())
        assert lease.held
    assert not _lock(tmp_path).exists() and not lease.held
    lease.release()  # idempotent


def test_creates_the_history_dir(tmp_path: Path) -> None:
    with Lease.acquire(tmp_path / "a" / "b", SID):
        assert (tmp_path / "a" / "b" / f"{SID}.lock").exists()


def test_reentrant_for_the_same_process(tmp_path: Path) -> None:
    first = Lease.acquire(tmp_path, SID)
    second = Lease.acquire(tmp_path, SID)
    assert LeaseRecord.parse(_lock(tmp_path).read_bytes()) == second.record
    first.release()  # the file names the second acquisition now: left alone
    assert _lock(tmp_path).exists()
    second.release()
    assert not _lock(tmp_path).exists()


def test_release_leaves_a_file_that_names_someone_else(tmp_path: Path) -> None:
    lease = Lease.acquire(tmp_path, SID)
    _write_holder(_lock(tmp_path), 4242, "elsewhere")
    lease.release()
    assert json.loads(_lock(tmp_path).read_text())["hostname"] == "elsewhere"


def test_live_pid_on_this_host_locks(tmp_path: Path) -> None:
    parent = os.getppid()
    _write_holder(_lock(tmp_path), parent, hostname(), process_start(parent))
    with pytest.raises(SessionLocked) as info:
        Lease.acquire(tmp_path, SID)
    assert (info.value.pid, info.value.host) == (parent, hostname())
    assert str(info.value) == f"session {SID} is active in another process (pid {parent} on {hostname()})"


def test_dead_pid_on_this_host_is_taken_over(tmp_path: Path) -> None:
    _write_holder(_lock(tmp_path), _dead_pid(), hostname())
    with Lease.acquire(tmp_path, SID) as lease:
        assert LeaseRecord.parse(_lock(tmp_path).read_bytes()) == lease.record


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_recycled_pid_is_detected_by_start_time(tmp_path: Path) -> None:
    parent = os.getppid()
    _write_holder(_lock(tmp_path), parent, hostname(), (process_start(parent) or 0) + 12345)
    with Lease.acquire(tmp_path, SID):
        pass
    assert pid_alive(parent, process_start(parent)) and not pid_alive(parent, (process_start(parent) or 0) + 1)


def test_foreign_host_is_respected_until_stale(tmp_path: Path) -> None:
    _write_holder(_lock(tmp_path), 77, "other-host", age=STALE_AFTER_SECS - 60)
    with pytest.raises(SessionLocked) as info:
        Lease.acquire(tmp_path, SID)
    assert (info.value.pid, info.value.host) == (77, "other-host")
    _age(_lock(tmp_path), 120)
    with Lease.acquire(tmp_path, SID) as lease:
        assert lease.record.hostname == hostname()


def test_injected_clock_decides_staleness(tmp_path: Path) -> None:
    _write_holder(_lock(tmp_path), 77, "other-host")
    mtime = _lock(tmp_path).stat().st_mtime
    fresh = LeasePolicy(clock=lambda: mtime + 5, stale_after=10)
    with pytest.raises(SessionLocked):
        Lease.acquire(tmp_path, SID, fresh)
    with Lease.acquire(tmp_path, SID, LeasePolicy(clock=lambda: mtime + 11, stale_after=10)):
        pass


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"pid": "x", "hostname": "h"}', b"[]"])
def test_corrupt_lock_file_grace_then_takeover(tmp_path: Path, content: bytes) -> None:
    _lock(tmp_path).write_bytes(content)
    with pytest.raises(SessionLocked) as info:
        Lease.acquire(tmp_path, SID)
    assert (info.value.pid, info.value.host) == (0, "unknown")
    _age(_lock(tmp_path), CORRUPT_GRACE_SECS + 1)
    with Lease.acquire(tmp_path, SID) as lease:
        assert LeaseRecord.parse(_lock(tmp_path).read_bytes()) == lease.record


def test_injected_liveness_and_identity(tmp_path: Path) -> None:
    _write_holder(_lock(tmp_path), 1234, "h1")
    me = LeasePolicy(pid=999, host="h1", is_alive=lambda pid, start: True)
    with pytest.raises(SessionLocked):
        Lease.acquire(tmp_path, SID, me)
    gone = LeasePolicy(pid=999, host="h1", is_alive=lambda pid, start: False)
    with Lease.acquire(tmp_path, SID, gone) as lease:
        assert (lease.record.pid, lease.record.hostname) == (999, "h1")
    assert not _lock(tmp_path).exists()


def test_no_temp_files_left_behind(tmp_path: Path) -> None:
    _write_holder(_lock(tmp_path), _dead_pid(), hostname())
    with Lease.acquire(tmp_path, SID):
        Lease.acquire(tmp_path, SID)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


_HOLDER = r"""
import sys
import time
from openheim.conversation.lease import Lease
lease = Lease.acquire(sys.argv[1], sys.argv[2])
print("held", flush=True)
sys.stdin.readline()
"""


def _spawn_holder(tmp_path: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path), SID],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_two_processes_killed_holder(tmp_path: Path) -> None:
    child = _spawn_holder(tmp_path)
    try:
        with pytest.raises(SessionLocked) as info:
            Lease.acquire(tmp_path, SID)
        assert (info.value.pid, info.value.host) == (child.pid, hostname())
        assert f"(pid {child.pid} on {hostname()})" in str(info.value)
    finally:
        child.kill()
        child.wait()
        child.stdin.close()  # type: ignore[union-attr]
        child.stdout.close()  # type: ignore[union-attr]
    assert _lock(tmp_path).exists()  # killed: the file stays, naming a dead pid
    with Lease.acquire(tmp_path, SID) as lease:
        assert lease.record.pid == os.getpid()


def test_two_processes_holder_exits_normally(tmp_path: Path) -> None:
    child = _spawn_holder(tmp_path)
    with pytest.raises(SessionLocked):
        Lease.acquire(tmp_path, SID)
    child.communicate("\n")
    with Lease.acquire(tmp_path, SID):
        pass


def test_unknowable_liveness_falls_back_to_staleness(tmp_path: Path) -> None:
    _write_holder(_lock(tmp_path), 1234, "h1")
    mtime = _lock(tmp_path).stat().st_mtime
    unknown = {"pid": 999, "host": "h1", "is_alive": lambda pid, start: None}
    with pytest.raises(SessionLocked):
        Lease.acquire(tmp_path, SID, LeasePolicy(clock=lambda: mtime + 60, **unknown))
    with Lease.acquire(tmp_path, SID, LeasePolicy(clock=lambda: mtime + STALE_AFTER_SECS + 1, **unknown)):
        pass


def test_bad_session_id_rejected(tmp_path: Path) -> None:
    from openheim.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        Lease.acquire(tmp_path, "../escape")


def test_refresh_touches_only_our_file(tmp_path: Path) -> None:
    lease = Lease.acquire(tmp_path, SID)
    _age(_lock(tmp_path), 100)
    lease.refresh()
    assert time.time() - _lock(tmp_path).stat().st_mtime < 50
    _write_holder(_lock(tmp_path), 4242, "elsewhere", age=100)
    lease.refresh()
    assert time.time() - _lock(tmp_path).stat().st_mtime > 50


_RACER = r"""
import os
import sys
import time
from pathlib import Path
from openheim.conversation.lease import Lease
from openheim.errors import SessionLocked
history, sid, go, racers = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
Path(f"{go}.{os.getpid()}.ready").touch()
while not go.exists():
    time.sleep(0.001)
try:
    lease = Lease.acquire(history, sid)
except SessionLocked:
    lease = None
Path(f"{go}.{os.getpid()}.done").touch()
deadline = time.monotonic() + 30
while lease is not None and len(list(go.parent.glob(go.name + ".*.done"))) < racers and time.monotonic() < deadline:
    time.sleep(0.01)  # a winner holds the lease until every racer has tried
print("locked" if lease is None else "won", flush=True)
"""


def _race(tmp_path: Path, trial: int, racers: int) -> list[str]:
    """``racers`` processes released at once on a lease whose holder died; what each got."""
    history = tmp_path / f"trial{trial}"
    history.mkdir()
    _write_holder(history / f"{SID}.lock", _dead_pid(), hostname())
    go = tmp_path / f"go{trial}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(history), SID, str(go), str(racers)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(racers)
    ]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob(f"go{trial}.*.ready"))) < racers and time.monotonic() < deadline:
        time.sleep(0.01)
    go.touch()
    return sorted(p.communicate(timeout=60)[0].strip() for p in procs)


def test_a_dead_holders_lease_has_exactly_one_taker(tmp_path: Path) -> None:
    """Six processes taking over a dead holder's lease at the same moment: one wins, every time."""
    for trial in range(10):
        outcomes = _race(tmp_path, trial, 6)
        assert outcomes.count("won") == 1, (trial, outcomes)
        assert outcomes.count("locked") == 5, (trial, outcomes)
