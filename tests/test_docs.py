"""Every ```python block in docs/*.md and README.md runs as written."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
CASES = [(doc, i, code) for doc in DOCS for i, code in enumerate(BLOCK.findall(doc.read_text()))]


@pytest.mark.parametrize(("doc", "index", "code"), CASES, ids=[f"{d.name}-{i}" for d, i, _ in CASES])
def test_doc_example_runs(doc, index, code, tmp_path):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OPENHEIM_HOME": str(tmp_path / "oh"),
                            "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, f"{doc.name} block {index} failed:\n{r.stderr}"
