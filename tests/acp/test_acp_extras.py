"""ACP: usage updates carry the session's cost in dollars; an image sent in a prompt is stored by hash and
comes back, as an image, from session/load in a new process."""

from __future__ import annotations

import base64

from acp_wire import AcpWire, updates
from cli_helpers import write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def test_usage_updates_carry_the_cost_and_images_survive_session_load(isolated_home, project):
    prices = '[prices."fake/fake-model"]\ninput = 3.0\noutput = 15.0\n'
    data = base64.b64encode(PNG).decode()
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url, extra=prices, provider_extra="context_window = 8000")
        server.enqueue(Reply(text="a dot", usage=(1000, 100)), Reply(text="still a dot", usage=(1000, 100)))
        wire = AcpWire()
        try:
            wire.initialize()
            sid = wire.new_session(project)
            prompt = [{"type": "text", "text": "what is it"}, {"type": "image", "mimeType": "image/png", "data": data}]
            response, frames = wire.call("session/prompt", {"sessionId": sid, "prompt": prompt})
            assert response["result"]["stopReason"] == "end_turn"
            assert updates(frames, "usage_update")[0]["cost"] == {"amount": 0.0045, "currency": "USD"}
            _, frames = wire.prompt(sid, "again")
            assert updates(frames, "usage_update")[0]["cost"] == {"amount": 0.009, "currency": "USD"}  # cumulative
        finally:
            wire.close()
        assert data not in (isolated_home / "history" / f"{sid}.jsonl").read_text()
        wire = AcpWire()
        try:
            wire.initialize()
            _, frames = wire.call("session/load", {"sessionId": sid, "cwd": str(project), "mcpServers": []})
            images = [u["content"] for u in updates(frames, "user_message_chunk") if u["content"]["type"] == "image"]
            assert images == [{"type": "image", "mimeType": "image/png", "data": data}]
        finally:
            wire.close()


def test_budgets_max_cost_stops_an_acp_turn(isolated_home, project):
    extra = '[prices."fake/fake-model"]\ninput = 3.0\noutput = 15.0\n[budgets]\nmax_cost = 0.05\n'
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url, extra=extra)
        server.enqueue(
            *[Reply(tool_calls=[ToolCall("list_dir", {"path": "."})], usage=(10_000, 1000)) for _ in range(3)]
        )
        wire = AcpWire()
        try:
            wire.initialize()
            response, _ = wire.prompt(wire.new_session(project), "look around")
            assert response["result"]["stopReason"] == "max_turn_requests"
        finally:
            wire.close()
        assert len(server.requests) == 2
