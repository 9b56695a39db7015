"""Every ```python block in docs/*.md and README.md runs as written.

Each block runs in a fresh directory with its own OPENHEIM_HOME, whose config.toml points at a fake
LLM server on 127.0.0.1. A block may script that server's replies with an HTML comment right before
it: ``<!-- fake-llm: [{"text": ...}, {"tool_calls": [{"name": ..., "arguments": {...}}]}] -->``;
unscripted requests are answered ``echo: <last user message>``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"(?:<!-- fake-llm: (.*?) -->\n)?```python\n(.*?)```", re.S)
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
CASES = [(doc, i, script, code) for doc in DOCS for i, (script, code) in enumerate(BLOCK.findall(doc.read_text()))]


def scripted(script: str) -> list[Reply]:
    replies = []
    for item in json.loads(script) if script else []:
        calls = [ToolCall(c["name"], c.get("arguments", {})) for c in item.get("tool_calls", [])]
        replies.append(Reply(text=item.get("text", ""), thinking=item.get("thinking", ""), tool_calls=calls))
    return replies


@pytest.mark.parametrize(("doc", "index", "script", "code"), CASES, ids=[f"{d.name}-{i}" for d, i, _, _ in CASES])
def test_doc_example_runs(doc, index, script, code, tmp_path):
    home = tmp_path / "oh"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    with FakeLLMServer(wire="openai") as srv:
        write_config(home, srv.base_url)
        srv.enqueue(*scripted(script))
        r = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=work,
            timeout=60,
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": str(tmp_path),
                "OPENHEIM_HOME": str(home),
                "PYTHONPATH": str(ROOT),
                "NO_PROXY": "127.0.0.1",
            },
        )
    assert r.returncode == 0, f"{doc.name} block {index} failed:\n{r.stderr}"
    assert srv.pending == 0, f"{doc.name} block {index} left scripted replies unused"
