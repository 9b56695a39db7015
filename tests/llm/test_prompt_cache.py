"""Prompt caching that pays, end to end through `openheim run`: a session's prefix is byte-stable, Anthropic
requests carry rolling breakpoints that a caching server reads back, OpenAI requests a per-session key, and
the cache traffic shows in the usage a script reads."""

from __future__ import annotations

import itertools
import json

from caching_anthropic import CachingAnthropic
from cli_helpers import fake_provider, openheim, write_config
from fake_llm import Reply, ToolCall


def _segment(raw: bytes, key: bytes) -> bytes:
    """The raw bytes of one top-level value of a JSON body, as sent."""
    start = raw.index(b'"' + key + b'":') + len(key) + 3
    _, end = json.JSONDecoder().raw_decode(raw.decode(), start)
    return raw[start:end]


def _without_marks(messages: list[dict]) -> list[dict]:
    return [
        {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]} for m in messages
    ]


def _marks(body: dict) -> int:
    blocks = [*body.get("tools", []), *body.get("system", [])] + [b for m in body["messages"] for b in m["content"]]
    return sum("cache_control" in b for b in blocks)


def test_a_sessions_prefix_is_byte_stable_and_read_from_the_cache(isolated_home, tmp_path):
    (tmp_path / "AGENTS.md").write_text("Answer briefly.\n" * 400)  # a system prompt worth caching
    (tmp_path / "notes.txt").write_text("x")
    with CachingAnthropic() as srv:
        write_config(isolated_home, srv.base_url, kind="anthropic")
        srv.enqueue(*[Reply(tool_calls=[ToolCall("list_dir", {"path": "."})]) for _ in range(3)], Reply(text="one"))
        first = openheim("run", "-o", "json", "look around", cwd=tmp_path)
        srv.enqueue(Reply(text="two"))
        second = openheim("run", "-c", "-o", "stream-json", "and again", cwd=tmp_path)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    bodies = [r.body for r in srv.requests]
    raws = [r.raw for r in srv.requests]
    assert len(bodies) == 5 and bodies[0]["system"]
    for raw in raws[1:]:  # the same bytes in every request of the session, across processes
        assert _segment(raw, b"system") == _segment(raws[0], b"system")
        assert _segment(raw, b"tools") == _segment(raws[0], b"tools")
    for before, after in itertools.pairwise(bodies):
        sent = _without_marks(before["messages"])
        assert _without_marks(after["messages"])[: len(sent)] == sent
        assert "cache_control" in after["messages"][-1]["content"][-1] and _marks(after) <= 4
    inputs = [inp + read + written for inp, read, written in srv.billed]
    reads = [read for _, read, _ in srv.billed]
    assert all(read / total >= 0.8 for read, total in zip(reads[2:], inputs[2:])), srv.billed
    usage = json.loads(first.stdout)["usage"]
    assert usage["cache_read_tokens"] == sum(reads[:4]) and usage["cache_creation_tokens"] > 0
    reports = [
        json.loads(line)["usage"]
        for line in second.stdout.splitlines()
        if '"type": "usage"' in line or '"type":"usage"' in line
    ]
    assert reports and reports[-1]["cache_read_tokens"] == reads[4] > 0


def test_openai_requests_carry_one_prompt_cache_key_per_session(isolated_home, tmp_path):
    with fake_provider("openai", isolated_home) as srv:
        for args in (["first"], ["-c", "second"], ["other session"]):
            assert openheim("run", *args, cwd=tmp_path).returncode == 0
    keys = [r.body.get("prompt_cache_key") for r in srv.requests]
    assert keys[0] and keys[0] == keys[1] != keys[2]
    assert keys[0].startswith("openheim-") and len(keys[0]) == len("openheim-") + 32


def test_openai_compatible_servers_get_no_prompt_cache_key(isolated_home, tmp_path):
    with fake_provider("openai_compatible", isolated_home) as srv:
        assert openheim("run", "hi", cwd=tmp_path).returncode == 0
    assert "prompt_cache_key" not in srv.requests[0].body
