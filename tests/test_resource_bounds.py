"""Resource bounds driven through `openheim run`: a huge sparse file costs read_file and search neither
memory nor time."""
from __future__ import annotations

import resource
import time

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall


@pytest.mark.parametrize("engine", ["rg", "python"])
def test_a_10_gb_sparse_file_is_not_scanned(isolated_home, tmp_path, engine):
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate(10 * 1024 ** 3)  # 10 GiB of NUL bytes, all of it a hole: one line with no end
    (tmp_path / "small.txt").write_text("a NEEDLE here\n")
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        srv.enqueue(Reply(tool_calls=[ToolCall("read_file", {"path": "big.txt", "offset": 2}, id="r"),
                                      ToolCall("search", {"pattern": "NEEDLE"}, id="s")]),
                    Reply(text="done"))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        r = openheim("run", "go", cwd=tmp_path, env={"PATH": "/nonexistent"} if engine == "python" else None)
        took = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert r.returncode == 0, r.stderr
    read, found = [m["content"] for m in srv.requests[1].body["messages"] if m["role"] == "tool"]
    assert "does not start within the first 64 MiB" in read
    assert found == "small.txt:1: a NEEDLE here"  # the huge file is skipped, not scanned
    assert took < 20 and after.ru_maxrss < 400 * 1024, (took, after.ru_maxrss)  # KiB: far below 10 GB
    assert after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime < 15
