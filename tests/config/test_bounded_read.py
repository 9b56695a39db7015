"""The one bounded reader: files read on a user's or a model's say are opened non-blocking, must be regular
files, have their type checked from the first bytes, and are never read past the cap + 1 bytes."""

from __future__ import annotations

import ast
import os
import resource
from pathlib import Path

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply

from openheim.config.bounded_read import NotRegularFile, TooBig, read_bounded

PACKAGE = Path(__file__).resolve().parents[2] / "openheim"


def run_with_image(home: Path, cwd: Path, image: str):
    with FakeLLMServer(wire="openai") as srv:
        write_config(home, srv.base_url)
        srv.enqueue(Reply(text="seen"))
        return openheim("run", "-i", image, "describe it", cwd=cwd, timeout=30)


def test_run_dash_i_dev_zero_is_one_line_not_a_memory_error(isolated_home, tmp_path):
    result = run_with_image(isolated_home, tmp_path, "/dev/zero")
    assert result.returncode != 0
    assert "MemoryError" not in result.stderr and "internal error" not in result.stderr
    assert "/dev/zero is not a regular file" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_run_dash_i_a_fifo_named_png_does_not_hang(isolated_home, tmp_path):
    os.mkfifo(tmp_path / "fifo.png")
    result = run_with_image(isolated_home, tmp_path, str(tmp_path / "fifo.png"))  # the old reader blocked for good
    assert result.returncode != 0 and "not a regular file" in result.stderr, result.stderr


def test_a_sparse_1_gib_non_image_named_png_is_refused_from_its_header(isolated_home, tmp_path):
    big = tmp_path / "big.png"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB of zeros that cost no disk
    result = run_with_image(isolated_home, tmp_path, str(big))
    assert result.returncode != 0 and "not a PNG, JPEG, GIF or WebP image" in result.stderr, result.stderr
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert peak_mb < 400, f"a child of this test peaked at {peak_mb:.0f} MB"


def test_a_big_real_png_header_is_refused_at_the_cap(isolated_home, tmp_path):
    big = tmp_path / "huge.png"
    with open(big, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + b"\0" * 8)
        f.truncate(1 << 30)
    result = run_with_image(isolated_home, tmp_path, str(big))
    assert result.returncode != 0 and "over the 5.0 MB limit" in result.stderr, result.stderr
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 < 400


def test_a_fifo_agents_md_in_the_project_does_not_hang_a_run(isolated_home, tmp_path):
    os.mkfifo(tmp_path / "AGENTS.md")
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        srv.enqueue(Reply(text="hello"))
        result = openheim("run", "hi", cwd=tmp_path, timeout=30)
    assert result.returncode == 0 and "hello" in result.stdout, result.stderr


def test_a_fifo_mcp_json_in_the_project_does_not_hang_a_run(isolated_home, tmp_path):
    os.mkfifo(tmp_path / ".mcp.json")  # a repository can ship one
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        srv.enqueue(Reply(text="hello"))
        result = openheim("run", "hi", cwd=tmp_path, timeout=30)
    assert result.returncode == 0 and "hello" in result.stdout, result.stderr


def test_the_reader_reads_at_most_the_cap_plus_one(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_bounded(path, 100) == b"x" * 100
    with pytest.raises(TooBig):
        read_bounded(path, 99)
    with pytest.raises(NotRegularFile):
        read_bounded("/dev/zero", 10)
    (tmp_path / "link").symlink_to(path)
    with pytest.raises(OSError):
        read_bounded(tmp_path / "link", 100, follow=False)


# Modules that read a file a user or model named, and must do it through the bounded reader.
ON_SOMEONES_SAY = {
    "core/images.py": "read_bounded",
    "conversation/skills.py": "read_bounded",
    "conversation/identity.py": "read_bounded",
    "conversation/instructions.py": "open_regular",
    "core/structured.py": "read_bounded",
    "config/regular_file.py": "open_regular",
    "checkpoints/store.py": "read_bounded",
    "checkpoints/undo.py": "read_bounded",
    "mcp/project.py": "read_bounded",
    "config/mcp_json.py": "read_bounded",
}


def test_every_reader_on_someones_say_goes_through_the_bounded_reader():
    for rel, name in ON_SOMEONES_SAY.items():
        tree = ast.parse((PACKAGE / rel).read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        called = {ast.unparse(n.func) for n in calls}
        assert name in called, rel
        unbounded = [
            ast.unparse(n)
            for n in calls
            if ast.unparse(n.func).endswith((".read_bytes", ".read_text"))
            or (isinstance(n.func, ast.Name) and n.func.id == "open")
        ]
        if rel not in ("checkpoints/store.py",):  # the store re-reads only its own blobs and manifests
            assert not unbounded, (rel, unbounded)
