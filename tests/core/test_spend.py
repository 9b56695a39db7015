"""Money: [prices] turn tokens into dollars in -o json and stream-json; --max-cost and [budgets] max_cost stop a
turn (exit 6, stop_reason "budget"), subagents included; a budget without a price is a one-line error."""

from __future__ import annotations

import json

import pytest
from cli_helpers import fake_provider, openheim
from fake_llm import Reply, ToolCall

from openheim.config.prices import Price, parse_prices
from openheim.core.models import Usage
from openheim.errors import ConfigError

PRICES = '[prices."fake/fake-model"]\ninput = 3.0\noutput = 15.0\ncache_read = 0.3\ncache_write = 3.75\n'


def test_price_arithmetic_and_table_errors():
    price = Price(3.0, 15.0, 0.3, 3.75)
    assert price.cost(Usage(1_000_000, 0)) == pytest.approx(3.0)
    assert price.cost(Usage(1000, 100, cache_creation_tokens=2000, cache_read_tokens=10_000)) == pytest.approx(
        (1000 * 3 + 100 * 15 + 2000 * 3.75 + 10_000 * 0.3) / 1e6
    )
    assert Price(2.0, 8.0).cost(Usage(0, 0, 1000, 1000)) == pytest.approx(4000 / 1e6)  # cache at the input price
    for bad, words in (
        ({"m": {"input": 1, "output": 2}}, '"provider/model"'),
        ({"a/m": {"input": 1}}, "output' is missing"),
        ({"a/m": {"input": -1, "output": 2}}, "0 or more"),
        ({"a/m": {"input": 1, "output": 2, "cached": 1}}, "unknown key 'cached'"),
    ):
        with pytest.raises(ConfigError, match=words):
            parse_prices(bad)


def test_cost_in_json_and_stream_json(isolated_home, tmp_path):
    with fake_provider("anthropic", isolated_home, extra=PRICES) as srv:
        srv.enqueue(Reply(text="hi", usage=(1000, 200, 4000)))
        r = openheim("run", "-o", "json", "hello", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        cost = (1000 * 3 + 200 * 15 + 4000 * 0.3) / 1e6
        session = json.loads(r.stdout)["session_id"]
        assert json.loads(r.stdout)["cost"] == pytest.approx(cost)
        srv.enqueue(Reply(text="hi", usage=(1000, 200)))
        r = openheim("run", "-o", "stream-json", "-s", session, "hello", cwd=tmp_path)
        lines = [json.loads(line) for line in r.stdout.splitlines()]
        usage = next(e for e in lines if e["type"] == "usage")
        # the call's cost, and the session's running total (kept with the session across runs)
        assert usage["cost"] == pytest.approx(0.006) and usage["total_cost"] == pytest.approx(cost + 0.006)
        assert lines[-1]["type"] == "result" and lines[-1]["cost"] == pytest.approx(0.006)
        meta = json.loads((isolated_home / "history" / f"{session}.json").read_text())["meta"]
        assert meta["cost"] == pytest.approx(cost + 0.006)


def test_no_price_no_cost(isolated_home, tmp_path):
    with fake_provider("openai", isolated_home) as srv:
        srv.enqueue(Reply(text="hi", usage=(1000, 200)))
        r = openheim("run", "-o", "json", "hello", cwd=tmp_path)
        assert r.returncode == 0 and "cost" not in json.loads(r.stdout)
        r = openheim("run", "--max-cost", "1", "hello", cwd=tmp_path)
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1 and '[prices."fake/fake-model"]' in r.stderr
        assert len(srv.requests) == 1  # the budgeted run sent nothing


def test_max_cost_stops_a_run(isolated_home, tmp_path):
    with fake_provider("openai", isolated_home, extra=PRICES) as srv:
        # each call costs 10k*3 + 1k*15 = $0.045; the budget of $0.05 is spent after the second
        calls = [Reply(tool_calls=[ToolCall("list_dir", {"path": "."})], usage=(10_000, 1000)) for _ in range(4)]
        srv.enqueue(*calls)
        r = openheim("run", "-o", "json", "--max-cost", "0.05", "look around", cwd=tmp_path)
        assert r.returncode == 6, r.stderr
        out = json.loads(r.stdout)
        assert out["stop_reason"] == "budget" and out["budget"]["kind"] == "cost"
        assert out["budget"]["limit"] == 0.05 and out["budget"]["used"] == pytest.approx(0.09)
        assert "cost budget" in r.stderr and len(srv.requests) == 2


def test_budgets_max_cost_in_config_counts_subagents(isolated_home, tmp_path):
    extra = PRICES + "[budgets]\nmax_cost = 0.05\n"
    with fake_provider("openai", isolated_home, extra=extra) as srv:
        srv.enqueue(
            Reply(
                tool_calls=[ToolCall("delegate_task", {"system_prompt": "helper", "task": "count"})],
                usage=(10_000, 1000),
            ),  # the parent: $0.045
            Reply(text="42", usage=(10_000, 1000)),  # the subagent: $0.045, the turn is now over budget
            Reply(text="never asked"),
        )
        r = openheim("run", "-o", "json", "delegate it", cwd=tmp_path)
        assert r.returncode == 6, r.stderr
        out = json.loads(r.stdout)
        assert out["stop_reason"] == "budget" and out["cost"] == pytest.approx(0.09)
        assert len(srv.requests) == 2
