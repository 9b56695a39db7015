"""`openheim init` through the CLI: writes files, refuses to overwrite, --force keeps a backup."""

from __future__ import annotations

import subprocess
import sys
import tomllib


def openheim(*args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "openheim", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw
    )


def test_init_writes_config_and_identity(isolated_home):
    r = openheim("init")
    assert r.returncode == 0, r.stderr
    config = isolated_home / "config.toml"
    assert f"Config file created at {config}" in r.stdout
    assert tomllib.loads(config.read_text())["default_provider"] == "openai"
    assert (isolated_home / "system.md").read_text().startswith("You are Openheim")


def test_init_refuses_to_overwrite_then_force_keeps_bak(isolated_home):
    config = isolated_home / "config.toml"
    config.write_text("# mine\n")
    r = openheim("init")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "already exists" in r.stderr and "--force" in r.stderr
    assert config.read_text() == "# mine\n"
    r = openheim("init", "--force")
    assert r.returncode == 0, r.stderr
    assert (isolated_home / "config.toml.bak").read_text() == "# mine\n"
    assert "default_provider" in config.read_text()


def test_init_honours_global_config_option(tmp_path):
    target = tmp_path / "sub" / "c.toml"
    assert openheim("--config", str(target), "init").returncode == 0
    assert target.exists()
