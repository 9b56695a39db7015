"""Helpers for end-to-end tests that run the real `openheim` CLI as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fake_llm import FakeLLMServer

ROOT = Path(__file__).resolve().parents[2]


def write_config(
    home: Path,
    base_url: str,
    kind: str = "openai_compatible",
    extra: str = "",
    provider_extra: str = "",
    name: str = "fake",
) -> Path:
    """A config.toml whose default provider points at a fake server."""
    path = home / "config.toml"
    path.write_text(
        f'default_provider = "{name}"\n{extra}\n'
        f'[providers.{name}]\nkind = "{kind}"\napi_base = "{base_url}"\n'
        f'default_model = "fake-model"\nmodels = ["fake-model", "other-model"]\n'
        f'api_key = "sk-test-SECRET-123"\ntimeout_secs = 5\n{provider_extra}\n'
    )
    return path


WIRES = {"openai": "openai", "openai_compatible": "openai", "anthropic": "anthropic", "gemini": "gemini"}


@contextmanager
def fake_provider(kind: str, home: Path, **config: str) -> Iterator[FakeLLMServer]:
    """A fake server speaking ``kind``'s wire, and a config.toml whose default provider of that kind uses it."""
    with FakeLLMServer(wire=WIRES[kind]) as server:
        write_config(home, server.base_url, kind=kind, **config)
        yield server


def openheim(
    *args: str, input: str | None = None, cwd: Path | None = None, env: dict | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    """Run the CLI to completion; stdin is /dev/null unless ``input`` is given."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "openheim", *args],
        input=input,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=timeout,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


def spawn(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.Popen:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "openheim", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=cwd,
        env=full_env,
    )
