"""The library facade end to end against the fake LLM server: custom tools and providers, streaming,
cancel from another thread, concurrent sessions, and closing the client."""

from __future__ import annotations

import threading
import time

import pytest
from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim import OpenheimClient, tool
from openheim.core.events import LlmResponse, ToolResult
from openheim.core.events import ToolCall as ToolCallEvent
from openheim.core.models import Choice, FinishReason, Message, StopReason
from openheim.errors import SessionBusy


@tool(read_only=True, kind="search")
def lookup_price(item: str, quantity: int = 1) -> dict:
    """Look up what some items cost.

    Args:
        item: The item's name.
        quantity: How many.
    """
    return {"item": item, "total": 2.5 * quantity}


def client_for(srv: FakeLLMServer, tmp_path, **tools) -> OpenheimClient:
    builder = OpenheimClient.builder().api_base(srv.base_url).api_key("sk-x").data_dir(tmp_path / "data")
    for handler in tools.values():
        builder = builder.tool(handler)
    return builder.build()


@pytest.fixture
def srv():
    with FakeLLMServer(wire="openai") as server:
        yield server


def test_decorated_function_tool_end_to_end(srv, tmp_path):
    srv.enqueue(
        Reply(tool_calls=[ToolCall("lookup_price", {"item": "apple", "quantity": 4})]),
        Reply(text="Four apples cost 10."),
    )
    with client_for(srv, tmp_path, price=lookup_price) as client:
        definition = next(t for t in client.tools() if t.name == "lookup_price")
        assert definition.description == "Look up what some items cost."
        assert definition.parameters["properties"]["quantity"] == {
            "type": "integer",
            "description": "How many.",
            "default": 1,
        }
        assert definition.parameters["required"] == ["item"]
        session = client.new_session(cwd=tmp_path)
        events = []
        result = session.prompt("price?", on_event=events.append)
    assert result.final_response == "Four apples cost 10."
    results = [e for e in events if isinstance(e, ToolResult)]
    assert results[0].result == '{"item": "apple", "total": 10.0}' and not results[0].is_error
    sent_tools = {t["function"]["name"] for t in srv.requests[0].body["tools"]}
    assert "lookup_price" in sent_tools
    assert srv.requests[1].body["messages"][-1]["content"] == '{"item": "apple", "total": 10.0}'


def test_a_plain_function_is_accepted_too(srv, tmp_path):
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    srv.enqueue(Reply(tool_calls=[ToolCall("shout", {"text": "hi"})]), Reply(text="done"))
    with client_for(srv, tmp_path, shout=shout) as client:
        events = []
        client.new_session(cwd=tmp_path).prompt("go", on_event=events.append)
    assert [e.result for e in events if isinstance(e, ToolResult)] == ["HI"]


def test_bad_arguments_reach_the_model_as_a_tool_error(srv, tmp_path):
    srv.enqueue(Reply(tool_calls=[ToolCall("lookup_price", {"item": 3})]), Reply(text="sorry"))
    with client_for(srv, tmp_path, price=lookup_price) as client:
        events = []
        client.new_session(cwd=tmp_path).prompt("go", on_event=events.append)
    error = next(e for e in events if isinstance(e, ToolResult))
    assert error.is_error and "expected a string (field `item`)" in error.result


class BlockingModel:
    """A provider with only a blocking send()."""

    provider_name, model = "blocking", "b1"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def send(self, messages, tools):
        time.sleep(self.delay)
        return Choice(Message.assistant(f"you said: {messages[-1].text()}"), FinishReason.STOP)


def test_send_only_provider_gets_a_streaming_wrapper(tmp_path):
    client = (
        OpenheimClient.builder()
        .api_base("http://127.0.0.1:9/v1")
        .data_dir(tmp_path)
        .llm_factory(lambda cfg: BlockingModel())
        .build()
    )
    with client:
        events = list(client.new_session(cwd=tmp_path).start_turn("hello"))
    assert [e.content for e in events if isinstance(e, LlmResponse)] == ["you said: hello"]


def test_stream_iterates_events_on_the_calling_thread(srv, tmp_path):
    srv.enqueue(Reply(text="one two three"))
    with client_for(srv, tmp_path) as client:
        turn = client.new_session(cwd=tmp_path).start_turn("count")
        seen = [(threading.current_thread().name, e.kind) for e in turn]
    assert all(name == threading.current_thread().name for name, _ in seen)
    assert turn.result.final_response == "one two three"
    assert seen[-1][1] == "finished"


def test_cancel_from_another_thread_ends_prompt_within_a_second(tmp_path):
    client = (
        OpenheimClient.builder()
        .api_base("http://127.0.0.1:9/v1")
        .data_dir(tmp_path)
        .llm_factory(lambda cfg: BlockingModel(delay=30))
        .build()
    )
    with client:
        session = client.new_session(cwd=tmp_path)
        threading.Timer(0.3, session.cancel).start()
        started = time.monotonic()
        result = session.prompt("wait forever")
        elapsed = time.monotonic() - started
    assert result.stop_reason is StopReason.CANCELLED
    assert elapsed < 1.3


def test_cancel_mid_stream_against_a_real_server(srv, tmp_path):
    srv.enqueue(Reply(text=" ".join(["word"] * 400), delay=0.02))
    with client_for(srv, tmp_path) as client:
        session = client.new_session(cwd=tmp_path)
        turn = session.start_turn("talk")
        for event in turn:
            if isinstance(event, LlmResponse):
                turn.cancel()
        assert turn.wait(1.0) and turn.result.stop_reason is StopReason.CANCELLED


def test_two_sessions_on_two_threads_at_once(srv, tmp_path):
    srv.enqueue(Reply(text="alpha", delay=0.05), Reply(text="beta", delay=0.05))
    results = {}
    with client_for(srv, tmp_path) as client:
        sessions = [client.new_session(cwd=tmp_path) for _ in range(2)]

        def run(i):
            results[i] = sessions[i].prompt(f"p{i}").final_response

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert sorted(results.values()) == ["alpha", "beta"]
    assert len(client.list_sessions()) == 2


def test_a_second_turn_on_a_busy_session_is_refused(tmp_path):
    client = (
        OpenheimClient.builder()
        .api_base("http://127.0.0.1:9/v1")
        .data_dir(tmp_path)
        .llm_factory(lambda cfg: BlockingModel(delay=0.5))
        .build()
    )
    with client:
        session = client.new_session(cwd=tmp_path)
        first = session.start_turn("one")
        with pytest.raises(SessionBusy):
            session.start_turn("two")
        assert session.busy
        first.cancel()
        follow = session.start_turn("three")  # waits for the cancelled turn, then runs
        assert follow.result.final_response == "you said: three"


def test_closing_the_client_leaves_no_turn_thread(srv, tmp_path):
    srv.enqueue(Reply(text=" ".join(["word"] * 2000), delay=0.01))
    client = client_for(srv, tmp_path)
    turn = client.new_session(cwd=tmp_path).start_turn("long")
    assert turn.poll(5.0)  # it is streaming
    client.close()
    assert turn.join(0.1)
    assert not [t for t in threading.enumerate() if t.name.startswith("openheim-turn")]


def test_context_usage_is_none_before_the_first_turn(srv, tmp_path):
    srv.enqueue(Reply(text="hi", usage=(12, 3)))
    with client_for(srv, tmp_path) as client:
        session = client.new_session(cwd=tmp_path)
        assert session.context_usage() is None
        session.prompt("hello")
        assert session.context_usage().input_tokens == 12


def test_tool_calls_are_presented_by_the_tool(srv, tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    srv.enqueue(Reply(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]), Reply(text="ok"))
    with client_for(srv, tmp_path) as client:
        turn = client.new_session(cwd=tmp_path).start_turn("read")
        views = [turn.present(e.tool_name, {"path": "a.txt"}) for e in turn if isinstance(e, ToolCallEvent)]
    assert views[0].title == "Read a.txt" and views[0].kind == "read" and views[0].read_only
    assert views[0].locations[0].path == str(tmp_path / "a.txt")


def test_acp_updates_and_replay_speak_valid_acp(srv, tmp_path):
    from acp_schema_check import check

    from openheim.acp.updates import acp_replay, acp_updates

    (tmp_path / "notes.md").write_text("old\n")
    srv.enqueue(
        Reply(thinking="hmm", tool_calls=[ToolCall("write_file", {"path": "notes.md", "content": "new\n"})]),
        Reply(text="written"),
    )
    live: list[dict] = []
    with client_for(srv, tmp_path) as client:
        session = client.new_session(cwd=tmp_path)
        session.prompt("write it", on_event=acp_updates(session, live.append))
        replayed: list[dict] = []
        acp_replay(session, client.stored_session(session.id)[1], replayed.append)
    for update in live + replayed:
        check("SessionUpdate", update)
    kinds = [u["sessionUpdate"] for u in live if u["sessionUpdate"] != "usage_update"]  # the window is known
    assert kinds[0] == "agent_thought_chunk" and kinds[-1] == "agent_message_chunk"
    call = next(u for u in live if u["sessionUpdate"] == "tool_call")
    assert call["title"] == "Write notes.md" and call["content"][0]["oldText"] == "old\n"
    assert next(u for u in live if u.get("status") == "completed")["toolCallId"] == call["toolCallId"]
    assert [u["sessionUpdate"] for u in replayed][:2] == ["user_message_chunk", "agent_thought_chunk"]
