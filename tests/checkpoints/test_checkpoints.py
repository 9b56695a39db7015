"""Checkpoints at the store level: ignore files, the size cap, symlinks out of the root, multi-turn undo,
pruning, and the config tables."""

from __future__ import annotations

import os
import time

import pytest

from openheim.checkpoints.prune import prune
from openheim.checkpoints.store import CheckpointStore
from openheim.checkpoints.turn import TurnCheckpoint
from openheim.checkpoints.undo import apply_undo, plan_undo
from openheim.config.long_sessions import CheckpointConfig
from openheim.config.schema import parse_config
from openheim.errors import ConfigError, NotFound


def turn(store, root, change, settings=None, session="s"):
    """One turn: checkpoint, ``change(root)``, record."""
    checkpoint = TurnCheckpoint(store, settings or CheckpointConfig(), session, str(root), 0)
    checkpoint.ensure()
    change(root)
    return checkpoint.finish()


def files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def root(tmp_path):
    path = tmp_path / "root"
    (path / "src").mkdir(parents=True)
    (path / "src" / "a.py").write_text("a = 1\n")
    (path / ".ignore").write_text("*.log\n")
    (path / "src" / ".gitignore").write_text("cache/\n")
    (path / "src" / "cache").mkdir()
    (path / "src" / "cache" / "x").write_text("cached\n")
    (path / "run.log").write_text("log\n")
    time.sleep(0.03)
    return path


def test_ignored_files_are_neither_recorded_nor_restored(tmp_path, root):
    store = CheckpointStore(tmp_path / "store")

    def change(r):
        (r / "run.log").write_text("more log\n")
        (r / "src" / "cache" / "x").write_text("recomputed\n")
        (r / "src" / "a.py").write_text("a = 2\n")

    record = turn(store, root, change)
    assert [(c.kind, c.path) for c in record.changes] == [("modified", "src/a.py")]
    apply_undo(store, plan_undo(store, "s"))
    assert (root / "src" / "a.py").read_text() == "a = 1\n" and (root / "run.log").read_text() == "more log\n"


def test_a_file_over_the_size_cap_is_listed_as_not_restorable(tmp_path, root):
    (root / "big.bin").write_bytes(b"x" * 2000)
    time.sleep(0.03)
    store = CheckpointStore(tmp_path / "store")
    small_cap = CheckpointConfig(max_file_bytes=1000)
    record = turn(store, root, lambda r: (r / "big.bin").write_bytes(b"y" * 3000), small_cap)
    assert [(c.path, c.restorable) for c in record.changes] == [("big.bin", False)]
    plan = plan_undo(store, "s")
    assert "too big to checkpoint" in plan.diffstat()[0] and not plan.conflicts  # not a conflict: no --force
    result = apply_undo(store, plan)
    assert result.skipped == ["big.bin"] and (root / "big.bin").read_bytes() == b"y" * 3000


def test_two_turns_undone_together_restore_the_earliest_state(tmp_path, root):
    store = CheckpointStore(tmp_path / "store")
    original = files(root)
    turn(store, root, lambda r: (r / "src" / "a.py").write_text("a = 2\n"))
    time.sleep(0.03)
    turn(store, root, lambda r: ((r / "src" / "a.py").write_text("a = 3\n"), (r / "new.txt").write_text("n\n")))
    plan = plan_undo(store, "s", turns=2)
    assert [r.turn for r in plan.turns] == [1, 2]
    apply_undo(store, plan)
    assert files(root) == original
    with pytest.raises(NotFound):
        plan_undo(store, "s")  # both are undone


def test_undo_never_writes_through_a_symlink_out_of_the_root(tmp_path, root):
    store = CheckpointStore(tmp_path / "store")
    outside = tmp_path / "outside"
    outside.mkdir()
    turn(store, root, lambda r: (r / "src" / "a.py").unlink())
    (root / "src").rename(root / "moved")
    (root / "src").symlink_to(outside)  # src/ now leads out of the root
    result = apply_undo(store, plan_undo(store, "s"), force=True)
    assert [f.split(":")[0] for f in result.failed] == ["src/a.py"]  # refused and reported, never followed
    assert list(outside.iterdir()) == []


def test_an_unchanged_root_reuses_its_checkpoint_and_reads_nothing(tmp_path, root, monkeypatch):
    store = CheckpointStore(tmp_path / "store")
    first = TurnCheckpoint(store, CheckpointConfig(), "s", str(root), 0)
    first.ensure()
    time.sleep(0.03)

    def no_reading(self, path):
        raise AssertionError(f"{path} was read")

    monkeypatch.setattr(CheckpointStore, "put_file", no_reading)
    again = TurnCheckpoint(CheckpointStore(tmp_path / "store"), CheckpointConfig(), "s", str(root), 0)
    again.ensure()
    assert again.snapshot.checkpoint == first.snapshot.checkpoint
    assert "src/a.py" in again.snapshot.files


def test_pruning_drops_old_sessions_and_the_copies_only_they_need(tmp_path, root):
    store = CheckpointStore(tmp_path / "store")
    turn(store, root, lambda r: (r / "src" / "a.py").write_text("a = 2\n"), session="old")
    old_log = store.session_log("old")
    os.utime(old_log, (time.time() - 40 * 86400,) * 2)
    (root / "src" / "b.py").write_text("b\n")
    turn(store, root, lambda r: (r / "src" / "b.py").write_text("b = 2\n"), session="new")
    blobs_before = len(list((store.dir / "blobs").glob("*/*")))
    assert prune(store, max_age_days=30, max_store_mb=1024, force=True) == 1
    assert not old_log.exists() and store.session_log("new").exists()
    assert len(list((store.dir / "blobs").glob("*/*"))) <= blobs_before
    apply_undo(store, plan_undo(store, "new"))  # what the remaining session needs is still there
    assert (root / "src" / "b.py").read_text() == "b\n"


def test_config_tables_are_checked():
    base = {
        "default_provider": "p",
        "providers": {"p": {"api_base": "http://127.0.0.1:1", "default_model": "m", "context_windows": {"m": 4096}}},
    }
    config = parse_config(
        {
            **base,
            "compaction": {"compact_at": 0.7, "compaction_model": "p/small"},
            "checkpoints": {"max_file_bytes": 1024, "max_age_days": 7},
        }
    )
    assert config.compaction.compact_at == 0.7 and config.checkpoints.max_file_bytes == 1024
    assert config.providers["p"].context_windows == {"m": 4096}
    for bad in (
        {"compaction": {"compact_at": 2}},
        {"checkpoints": {"max_files": 0}},
        {"compaction": {"enabled": "yes"}},
    ):
        with pytest.raises(ConfigError) as e:
            parse_config({**base, **bad})
        assert "\n" not in str(e.value)
