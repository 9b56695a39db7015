"""`--max-cost` holds whatever the server's numbers say (core/spend.py, counted at core/llm/reply.py):
a stream without usage is counted as an estimate (about 4 bytes a token), said once; a negative count is 0."""

from __future__ import annotations

import json

from cli_helpers import fake_provider, openheim
from fake_llm import Reply

from openheim.core.spend import BYTES_PER_TOKEN, ESTIMATE_NOTICE

PRICES = '[prices."fake/fake-model"]\ninput = 3.0\noutput = 15.0\n'


def _event(delta: dict, finish: str | None = None, usage: dict | None = None) -> str:
    payload: dict = {"id": "c", "object": "chat.completion.chunk", "model": "fake-model"}
    payload["choices"] = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
    if usage:
        payload["usage"] = usage
    return f"data: {json.dumps(payload)}\n\n"


def _tool_call(n: int, usage: dict | None = None) -> Reply:
    """A streamed call of list_dir, with ``usage`` or (like many compatible servers and proxies) none."""
    call = {"index": 0, "id": f"call_{n}", "type": "function", "function": {"name": "list_dir", "arguments": "{}"}}
    events = [_event({"role": "assistant", "tool_calls": [call]}), _event({}, "tool_calls")]
    if usage:
        events.append(_event({}, usage=usage))
    return Reply(raw_sse=[*events, "data: [DONE]\n\n"])


def test_a_stream_without_usage_is_estimated_and_the_budget_stops_the_run(isolated_home, tmp_path):
    with fake_provider("openai", isolated_home, extra=PRICES) as srv:
        srv.enqueue(*(_tool_call(n) for n in range(30)))
        # one request is some 10-20 kB (system prompt, tools): a few thousand tokens, about $0.01 a call
        r = openheim("run", "-o", "json", "--max-cost", "0.03", "look around", cwd=tmp_path)
        assert r.returncode == 6, r.stderr
        out = json.loads(r.stdout)
        assert out["stop_reason"] == "budget" and out["budget"]["kind"] == "cost"
        assert 2 <= len(srv.requests) <= 6
        first = len(srv.requests[0].raw)
        assert out["usage"]["input_tokens"] >= len(srv.requests) * first // BYTES_PER_TOKEN
        assert r.stderr.count(ESTIMATE_NOTICE) == 1


def test_without_a_budget_nothing_is_estimated(isolated_home, tmp_path):
    with fake_provider("openai", isolated_home, extra=PRICES) as srv:
        srv.enqueue(
            _tool_call(0), _tool_call(1), Reply(raw_sse=[_event({"content": "done"}, "stop"), "data: [DONE]\n\n"])
        )
        r = openheim("run", "-o", "json", "look around", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "estimate" not in r.stderr and json.loads(r.stdout).get("cost", 0) == 0


def test_a_negative_count_is_clamped_at_zero(isolated_home, tmp_path):
    negative = {"prompt_tokens": 10_000, "completion_tokens": -10_000_000, "total_tokens": 0}
    with fake_provider("openai", isolated_home, extra=PRICES) as srv:
        srv.enqueue(*(_tool_call(n, negative) for n in range(10)))
        r = openheim("run", "-o", "json", "--max-cost", "0.05", "look around", cwd=tmp_path)
        assert r.returncode == 6, r.stderr
        out = json.loads(r.stdout)
        assert out["usage"]["output_tokens"] == 0 and out["cost"] > 0
        assert len(srv.requests) == 2  # 10k input tokens at $3/M is $0.03 a call: over $0.05 after the second
        assert "estimate" not in r.stderr
