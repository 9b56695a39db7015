"""The single-file launcher (build/launcher.sh via build/pack.sh) with a tiny stand-in payload instead of the
frozen folder: where it unpacks, what it refuses to run, how it recovers from a damaged file or cache.

The stand-in `openheim` prints `ran <its own path> <args>`, so a test sees which copy the launcher executed.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OTHER_UID = 65534  # "nobody": another user on every Linux

pytestmark = pytest.mark.skipif(
    shutil.which("gzip") is None or shutil.which("tar") is None, reason="needs gzip and tar"
)

FAKE = """#!/bin/sh
case "$1" in --version) echo "openheim, version 9.9.9" ;; *) echo "ran $0 $*" ;; esac
"""


def pack(where: Path) -> Path:
    folder = where / "onedir"
    (folder / "_internal").mkdir(parents=True)
    (folder / "_internal" / "filler.bin").write_bytes(os.urandom(64 * 1024))  # a payload of a few blocks
    (folder / "openheim").write_text(FAKE)
    (folder / "openheim").chmod(0o755)
    out = where / "openheim"
    r = subprocess.run(
        ["bash", str(ROOT / "build" / "pack.sh"), str(folder), str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return out


def launcher_id(binary: Path) -> str:
    line = next(x for x in binary.read_bytes().splitlines() if x.startswith(b"id="))
    return line[3:].decode()


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every user can reach (pytest's own tmp dirs are private to their owner)."""
    path = Path(tempfile.mkdtemp(prefix="launcher-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def binary(shared: Path) -> Path:
    made = pack(shared)
    made.chmod(0o755)
    return made


def start(binary: Path, *args: str, user: int | None = None, **env: str) -> subprocess.CompletedProcess:
    """Start the launcher with only PATH and ``env`` (no HOME unless given), as cron or `env -i` would."""
    return subprocess.run(
        [str(binary), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PATH": os.environ["PATH"], **env},
        user=user,
        stdin=subprocess.DEVNULL,
    )


def names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_first_start_unpacks_and_marks_the_copy_and_later_starts_run_it(binary, tmp_path):
    cache = tmp_path / "cache"
    first = start(binary, "hello", OPENHEIM_CACHE_DIR=str(cache))
    copy = cache / launcher_id(binary)
    assert first.returncode == 0 and first.stdout == f"ran {copy}/openheim hello\n" and first.stderr == ""
    assert names(cache) == [copy.name] and (copy / ".unpacked").is_file()
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    again = start(binary, "--version", OPENHEIM_CACHE_DIR=str(cache))
    assert again.stdout == "openheim, version 9.9.9\n" and again.stderr == ""


def test_a_damaged_file_is_refused_and_never_poisons_the_cache(binary, tmp_path):
    cache = tmp_path / "cache"
    damaged = tmp_path / "damaged"
    data = bytearray(binary.read_bytes())
    data[-7] ^= 0x01  # one flipped bit in gzip's CRC: gzip fails, tar still exits 0
    damaged.write_bytes(bytes(data))
    damaged.chmod(0o755)
    r = start(damaged, "x", OPENHEIM_CACHE_DIR=str(cache))
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "damaged" in r.stderr and "download it again" in r.stderr
    assert names(cache) == []  # nothing half-checked is left behind
    good = start(binary, "x", OPENHEIM_CACHE_DIR=str(cache))  # the intact file with the same id then works
    assert good.returncode == 0 and good.stdout.startswith("ran "), good.stderr


def test_an_unmarked_copy_is_unpacked_again_once_with_one_line(binary, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    broken = cache / launcher_id(binary)
    broken.mkdir()
    (broken / "openheim").write_text("#!/bin/sh\necho broken; exit 99\n")  # what an older launcher cached
    (broken / "openheim").chmod(0o755)
    r = start(binary, "x", OPENHEIM_CACHE_DIR=str(cache))
    assert r.returncode == 0 and r.stdout == f"ran {broken}/openheim x\n"
    assert r.stderr == f"openheim: the copy in {broken} is incomplete or was changed; unpacking it again\n"
    assert (broken / ".unpacked").is_file() and names(cache) == [broken.name]
    assert start(binary, "x", OPENHEIM_CACHE_DIR=str(cache)).stderr == ""


def test_stale_unpack_dirs_of_killed_starts_are_removed(binary, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    live = subprocess.Popen(["sleep", "30"])
    try:
        for name in (".unpack.abcdef", ".unpack.999999999.abcdef", f".unpack.{live.pid}.abcdef"):
            (cache / name / "x").mkdir(parents=True)
        r = start(binary, "x", OPENHEIM_CACHE_DIR=str(cache))
        assert r.returncode == 0, r.stderr
        # dead starts' leftovers go; a start still unpacking (its process alive) keeps its own
        assert names(cache) == sorted([launcher_id(binary), f".unpack.{live.pid}.abcdef"])
    finally:
        live.kill()
        live.wait()


def test_a_copy_that_lost_a_file_is_unpacked_again_with_one_line(binary, tmp_path):
    cache = tmp_path / "cache"
    assert start(binary, "x", OPENHEIM_CACHE_DIR=str(cache)).returncode == 0
    copy = cache / launcher_id(binary)
    extra = copy / "lib.so"  # a file of the copy that a cache cleaner deleted
    extra.write_text("x")
    (copy / ".unpacked").write_text(str(int((copy / ".unpacked").read_text()) + 1) + "\n")
    extra.unlink()
    r = start(binary, "x", OPENHEIM_CACHE_DIR=str(cache))
    assert r.returncode == 0 and r.stdout == f"ran {copy}/openheim x\n"
    assert r.stderr == f"openheim: the copy in {copy} is incomplete or was changed; unpacking it again\n"
    assert start(binary, "x", OPENHEIM_CACHE_DIR=str(cache)).stderr == ""


def test_a_stale_unpack_dir_beside_a_complete_copy_is_removed(binary, tmp_path):
    cache = tmp_path / "cache"
    assert start(binary, "x", OPENHEIM_CACHE_DIR=str(cache)).returncode == 0
    (cache / ".unpack.999999999.abcdef" / "x").mkdir(parents=True)
    r = start(binary, "x", OPENHEIM_CACHE_DIR=str(cache))
    assert r.returncode == 0 and r.stderr == ""
    assert names(cache) == [launcher_id(binary)]


def test_a_symlinked_cache_dir_is_never_followed(binary, tmp_path):
    target = tmp_path / "target"
    target.mkdir(mode=0o755)
    link = tmp_path / "link"
    link.symlink_to(target)
    r = start(binary, "x", OPENHEIM_CACHE_DIR=str(link), TMPDIR=str(tmp_path))
    assert r.returncode == 0, r.stderr  # it falls back to the private temp dir
    assert names(target) == [] and stat.S_IMODE(target.stat().st_mode) == 0o755  # not chmod-ed, not filled
    assert r.stdout.startswith(f"ran {tmp_path}/openheim-{os.getuid()}/")
    # with no HOME, the private temp dir itself planted as a symlink: refused with one line
    private = tmp_path / "t2" / f"openheim-{os.getuid()}"
    private.parent.mkdir()
    private.symlink_to(target)
    r = start(binary, "x", TMPDIR=str(private.parent))
    assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "is a symlink or not a private directory of yours" in r.stderr and names(target) == []


def test_a_group_writable_copy_is_not_run_but_replaced(binary, tmp_path):
    cache = tmp_path / "cache"
    assert start(binary, "x", OPENHEIM_CACHE_DIR=str(cache)).returncode == 0
    exe = cache / launcher_id(binary) / "openheim"
    exe.write_text("#!/bin/sh\necho planted\n")
    exe.chmod(0o777)
    r = start(binary, "x", OPENHEIM_CACHE_DIR=str(cache))
    assert r.stdout == f"ran {exe} x\n" and "unpacking it again" in r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as two users")
def test_another_users_planted_binary_is_never_run(binary, shared):
    """Another user pre-creates the private temp dir (its path and the id are public) with a binary in it;
    the victim starts with no HOME. Here root plants and "nobody" is the victim, then the other way round."""
    tmpdir = shared / "tmp"
    tmpdir.mkdir(mode=0o1777)
    tmpdir.chmod(0o1777)
    proof = shared / "proof"
    for planter, victim in ((0, OTHER_UID), (OTHER_UID, 0)):
        private = tmpdir / f"openheim-{victim}"
        copy = private / launcher_id(binary)
        copy.mkdir(parents=True)
        (copy / ".unpacked").touch()
        (copy / "openheim").write_text(f"#!/bin/sh\ntouch {proof}\n")
        (copy / "openheim").chmod(0o755)
        for p in (private, copy, copy / ".unpacked", copy / "openheim"):
            os.chown(p, planter, planter)
        private.chmod(0o755)
        r = start(binary, "x", user=victim, TMPDIR=str(tmpdir))
        assert r.returncode == 1 and r.stdout == "" and not proof.exists()
        assert r.stderr == (
            f"openheim: {private} is a symlink or not a private directory of yours; remove it "
            "or set OPENHEIM_CACHE_DIR to a directory you own\n"
        )
        shutil.rmtree(private)
        ok = start(binary, "x", user=victim, TMPDIR=str(tmpdir))  # once it is gone the victim's own copy works
        assert ok.returncode == 0 and ok.stdout == f"ran {copy}/openheim x\n", ok.stderr
        assert private.stat().st_uid == victim and not proof.exists()
