"""The portable binary (build/build.sh --portable): it needs at most glibc 2.31 and runs on Debian 11.

The floor is read with `objdump -T` from every ELF file the one-file binary carries: it is unpacked (the
folder build/pack.sh packed behind its launcher, or a PyInstaller onefile's archive), and its executable
and each library and extension module in it are read. The binary is
then run inside the Debian 11 root it was built in, whose glibc is 2.31, against the fake LLM server.

build/dist/portable/openheim is used when it is newer than its sources; otherwise it is rebuilt when this
machine can (root and debootstrap) and either the Debian 11 root with its compiled Python is already cached
(a warm rebuild takes about a minute) or a cold build is wanted: under CI (`CI` set, as by .ci/run's
machines) or with OPENHEIM_TEST_PORTABLE=1 (a cold build took 4 min 55 s on 2 cores: see
docs/packaging.md). OPENHEIM_TEST_PORTABLE=0 skips this file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer
from memory_fakes import EmbeddingsServer

import openheim

# a built binary names the commit it was built from (build/openheim.spec writes it)
BUILT_VERSION = re.compile(rf"openheim, version {re.escape(openheim.__version__)} \(commit [0-9a-f]{{12}}(-dirty)?\)\n")

ROOT = Path(__file__).resolve().parents[2]
PORTABLE_BIN = ROOT / "build" / "dist" / "portable" / "openheim"
DEFAULT_BIN = ROOT / "build" / "dist" / "openheim"
BULLSEYE = ROOT / "build" / ".portable" / "root"
PYTHON_STAMP = BULLSEYE / "opt" / "python3.11" / ".openheim-python"
FLOOR = (2, 31)  # Debian 11, Ubuntu 20.04, RHEL 9

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),  # the first test may wait for a build
    pytest.mark.skipif(os.environ.get("OPENHEIM_TEST_PORTABLE") == "0", reason="OPENHEIM_TEST_PORTABLE=0"),
    pytest.mark.skipif(find_spec("PyInstaller") is None, reason="PyInstaller (a test dependency) is not installed"),
    pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) is not installed"),
]


def _sources() -> list[Path]:
    """Everything the portable binary is built from."""
    return [
        *ROOT.joinpath("openheim").rglob("*.py"),
        ROOT / "openheim.py",
        ROOT / "pyproject.toml",
        ROOT / "build" / "openheim.spec",
        ROOT / "build" / "build.sh",
        ROOT / "build" / "portable.sh",
        ROOT / "build" / "pack.sh",
        ROOT / "build" / "launcher.sh",
        *ROOT.joinpath("build", "hooks").glob("*.py"),
    ]


def _is_fresh(binary: Path) -> bool:
    return binary.is_file() and all(p.stat().st_mtime < binary.stat().st_mtime for p in _sources())


def _cannot_build() -> str:
    """Why this machine cannot run build/build.sh --portable, or '' when it can."""
    if os.geteuid() != 0:
        return "the portable build needs root (debootstrap, chroot)"
    cold_wanted = bool(os.environ.get("CI")) or os.environ.get("OPENHEIM_TEST_PORTABLE") == "1"
    if cold_wanted:
        return ""  # without debootstrap the build fails, saying so
    if shutil.which("debootstrap") is None and not Path("/usr/sbin/debootstrap").exists():
        return "the portable build needs debootstrap (apt-get install debootstrap)"
    if not PYTHON_STAMP.is_file():
        return (
            "no cached Debian 11 root with its compiled Python (a cold build takes minutes); "
            "run build/build.sh --portable once, or set OPENHEIM_TEST_PORTABLE=1"
        )
    return ""


BACKGROUND_BUILD = ROOT / "build" / ".portable" / "background"  # .ci/run starts the build here, beside the tests


def _wait_for_background_build(limit: float = 900) -> None:
    """When .ci/run started the portable build alongside the tests, wait for it to end (its exit status file)."""
    log, status = BACKGROUND_BUILD.with_suffix(".log"), BACKGROUND_BUILD.with_suffix(".status")
    if not log.is_file():
        return
    deadline = time.monotonic() + limit
    while not status.is_file():
        assert time.monotonic() < deadline, f"the background portable build did not end in {limit:.0f} s"
        time.sleep(2)
    assert status.read_text().strip() == "0", f"the background portable build failed:\n{log.read_text()[-3000:]}"


@pytest.fixture(scope="module")
def portable_bin() -> Path:
    given = os.environ.get("OPENHEIM_PORTABLE_BIN")
    if given:
        return Path(given).resolve()
    _wait_for_background_build()
    if not _is_fresh(PORTABLE_BIN):
        reason = _cannot_build()
        if reason:
            state = "is older than its sources" if PORTABLE_BIN.is_file() else "is not built"
            pytest.skip(f"{PORTABLE_BIN.relative_to(ROOT)} {state} and {reason}")
        r = subprocess.run(
            ["bash", str(ROOT / "build" / "build.sh"), "--portable"],
            check=False,
            capture_output=True,
            text=True,
            timeout=880,
            stdin=subprocess.DEVNULL,
        )
        assert r.returncode == 0, f"portable build failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert _is_fresh(PORTABLE_BIN), f"{PORTABLE_BIN} is missing or older than its sources after the build"
    return PORTABLE_BIN


# --- the glibc floor ---------------------------------------------------------------------------------------


def _glibc_needed(elf: Path) -> tuple[int, ...]:
    """The highest GLIBC_x.y symbol version an ELF file refers to; (0,) when it refers to none."""
    out = subprocess.run(["objdump", "-T", str(elf)], check=False, capture_output=True, text=True, timeout=60).stdout
    versions = [tuple(int(n) for n in v.split(".")) for v in re.findall(r"\bGLIBC_(\d+(?:\.\d+)+)\b", out)]
    return max(versions, default=(0,))


def _unpack(binary: Path, scratch: Path) -> Path:
    """The folder a binary runs from: build/pack.sh's launcher + tar.gz, or a PyInstaller onefile
    (its bootloader as `openheim` and its archive's entries), unpacked into scratch."""
    head = binary.read_bytes()[:4096]
    folder = scratch / "unpacked"
    folder.mkdir()
    if head.startswith(b"#!"):  # build/pack.sh: `tail -n +SKIP "$0" | gzip -dc | tar -xf -`
        skip = int(re.search(rb'tail -n \+(\d+) "\$0"', head).group(1))
        payload = b"".join(binary.read_bytes().splitlines(keepends=True)[skip - 1 :])
        subprocess.run(["tar", "-xzf", "-", "-C", str(folder)], input=payload, check=True, timeout=120)
        return folder
    from PyInstaller.archive.readers import CArchiveReader

    shutil.copy2(binary, folder / "openheim")
    archive = CArchiveReader(str(binary))
    for name, entry in archive.toc.items():
        if entry[-1] not in ("m", "s", "z", "o"):  # Python modules, scripts, the PYZ and options: never ELF
            target = folder / "_internal" / name  # laid out as a onedir folder is
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.extract(name) or b"")
    return folder


def glibc_needs(binary: Path, scratch: Path) -> dict[str, tuple[int, ...]]:
    """GLIBC floor of each ELF file a binary runs: its executable (`openheim`) and every library and
    extension module beside it, by path in its folder."""
    folder = binary.parent if binary.parent.name.endswith("-onedir") else _unpack(binary, scratch)
    needs = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.open("rb").read(4) == b"\x7fELF":
            needs[str(path.relative_to(folder))] = _glibc_needed(path)
    return needs


def _show(version: tuple[int, ...]) -> str:
    return "GLIBC_" + ".".join(map(str, version))


def test_portable_binary_needs_at_most_glibc_2_31(portable_bin, tmp_path):
    needs = glibc_needs(portable_bin, tmp_path)
    assert any(name.endswith("libpython3.11.so.1.0") for name in needs), f"not unpacked: {sorted(needs)}"
    assert any("sqlite_vec/vec0" in name for name in needs), "sqlite-vec's library is not inside"
    too_new = {name: _show(v) for name, v in needs.items() if v > FLOOR}
    assert not too_new, f"these files need more than {_show(FLOOR)}: {too_new}"
    print(f"portable build needs {_show(max(needs.values()))} ({len(needs)} ELF files)")


def test_default_build_reports_its_floor(tmp_path):
    """The default build links against the glibc of the machine that builds it (GLIBC_2.35 on Debian 12),
    so a 2.31 check would test the build machine, not this project: its floor is reported, and only its
    bootloader (PyInstaller's prebuilt one, GLIBC_2.14 or lower) is held to the floor."""
    if not DEFAULT_BIN.is_file():
        pytest.skip("build/dist/openheim is not built (tests/packaging/test_frozen.py builds it)")
    needs = glibc_needs(DEFAULT_BIN, tmp_path)
    assert any(name.endswith("libpython3.11.so.1.0") for name in needs), f"not unpacked: {sorted(needs)}"
    assert needs["openheim"] <= FLOOR, f"the bootloader needs {_show(needs['openheim'])}"
    worst = max(needs, key=needs.__getitem__)
    print(f"default build needs {_show(needs[worst])} ({worst}); build/build.sh --portable needs <= {_show(FLOOR)}")


# --- running on Debian 11 ----------------------------------------------------------------------------------


@contextmanager
def bullseye_dir() -> Iterator[tuple[Path, str]]:
    """A scratch folder inside the Debian 11 root (host path, path inside), with /proc and /dev mounted."""
    if os.geteuid() != 0:
        pytest.skip("running inside the Debian 11 root needs root (chroot)")
    if not BULLSEYE.joinpath("etc", "debian_version").is_file():
        pytest.skip("no Debian 11 root (build/build.sh --portable makes build/.portable/root)")
    mounted: list[Path] = []
    scratch = Path(tempfile.mkdtemp(prefix="openheim-test-", dir=BULLSEYE / "tmp"))
    try:
        for target, command in (
            (BULLSEYE / "proc", ["mount", "-t", "proc", "proc"]),
            (BULLSEYE / "dev", ["mount", "--bind", "/dev"]),
        ):
            if not os.path.ismount(target):
                subprocess.run([*command, str(target)], check=True, timeout=30)
                mounted.append(target)
        yield scratch, "/" + str(scratch.relative_to(BULLSEYE))
    finally:
        for target in reversed(mounted):
            subprocess.run(["umount", "--lazy", str(target)], check=False, timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)


def in_bullseye(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **(env or {})}
    command = ["chroot", str(BULLSEYE), "/usr/bin/env", "-i", *(f"{k}={v}" for k, v in full_env.items()), *argv]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_portable_binary_runs_on_debian_11(portable_bin):
    with bullseye_dir() as (host_dir, inside):
        libc = in_bullseye("ldd", "--version")
        assert re.search(r"\b2\.31\b", libc.stdout.splitlines()[0]), libc.stdout  # the Debian 11 glibc
        shutil.copy2(portable_bin, host_dir / "openheim")
        binary = f"{inside}/openheim"
        (host_dir / "home").mkdir()
        env = {"HOME": f"{inside}/home", "OPENHEIM_HOME": f"{inside}/home", "NO_PROXY": "127.0.0.1"}

        version = in_bullseye(binary, "--version", env=env)
        assert version.returncode == 0, version.stderr
        assert BUILT_VERSION.fullmatch(version.stdout)

        with FakeLLMServer(wire="openai") as srv, EmbeddingsServer() as emb:
            (host_dir / "home" / "config.toml").write_text(
                'default_provider = "fake"\n[memory]\nembedding_provider = "emb"\nembedding_model = "embed-a"\n'
                + _provider("fake", srv.base_url)
                + _provider("emb", emb.url + "/v1")
            )
            run = in_bullseye(binary, "run", "hi", env=env)
            added = in_bullseye(binary, "memory", "add", "my automobile is red", "--json", env=env)
            found = in_bullseye(binary, "memory", "search", "vehicle", "--json", env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "echo: hi\n"
    assert srv.requests[0].body["messages"][-1] == {"role": "user", "content": "hi"}
    assert added.returncode == 0, added.stderr
    result = json.loads(found.stdout)
    assert result["mode"] == "semantic", result.get("reason")  # sqlite-vec loaded into Debian 11's SQLite
    assert result["results"][0]["content"] == "my automobile is red"


def _provider(name: str, base_url: str) -> str:
    return (
        f'[providers.{name}]\nkind = "openai_compatible"\napi_base = "{base_url}"\n'
        f'default_model = "fake-model"\napi_key = "sk-test-SECRET-123"\ntimeout_secs = 5\n'
    )


def test_release_script_checksums_the_portable_binary(portable_bin):
    """build/release.sh --skip-build, as .github/workflows/release.yml runs it after .ci/run."""
    if portable_bin != PORTABLE_BIN:
        pytest.skip("OPENHEIM_PORTABLE_BIN names another binary than build/release.sh ships")
    r = subprocess.run(
        ["bash", str(ROOT / "build" / "release.sh"), "--skip-build"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if r.returncode == 1 and "another checkout" in r.stderr and not os.environ.get("CI"):
        pytest.skip("the portable binary was built before the last commit (CI always builds it afresh)")
    assert r.returncode == 0, r.stderr
    name = f"openheim-linux-{os.uname().machine}"
    check = subprocess.run(["sha256sum", "-c", f"{name}.sha256"], cwd=ROOT / "build" / "release", capture_output=True)
    assert check.returncode == 0, check.stdout
