"""The session runtime through the library facade: persistence, busy/lock rules, model and mode switches."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_helpers import write_config
from fake_client import ScriptedLlm, text_reply, tool_reply

from openheim.client import OpenheimClient
from openheim.core.models import StopReason
from openheim.errors import ConfigError, InvalidArgument, NotFound, SessionBusy, TooManySessions
from openheim.runtime.live import SessionMap, SessionState


def make_client(home: Path, llm: ScriptedLlm, extra: str = "", **opts) -> OpenheimClient:
    write_config(home, "http://127.0.0.1:9/v1", extra=extra)
    builder = OpenheimClient.builder().llm_factory(lambda cfg: llm)
    for key, value in opts.items():
        getattr(builder, key)(value)
    return builder.build()


def test_turn_is_persisted_and_reloads_in_a_new_client(isolated_home, tmp_path):
    llm = ScriptedLlm([tool_reply(("list_dir", {})), text_reply("all done")])
    client = make_client(isolated_home, llm)
    session = client.new_session(tmp_path)
    result = session.prompt("look around")
    assert result.stop_reason == StopReason.END_TURN
    other = make_client(isolated_home, ScriptedLlm([]))
    metas = other.list_sessions()
    assert [m.id for m in metas] == [session.id]
    assert metas[0].title == "look around" and metas[0].cwd == str(tmp_path) and metas[0].model == "fake-model"
    messages = other.stored_session(session.id)[1]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    handle, loaded = other.resume_session(session.id, tmp_path)
    assert loaded.warning is None and len(loaded.messages) == 4
    handle.prompt("and now?")
    assert [m.role for m in other.stored_session(session.id)[1]][-2:] == ["user", "assistant"]


def test_second_prompt_on_a_busy_session_is_refused(isolated_home, tmp_path):
    llm = ScriptedLlm(["block"])
    client = make_client(isolated_home, llm)
    session = client.new_session(tmp_path)
    worker = threading.Thread(target=session.prompt, args=("first",))
    worker.start()
    deadline = time.monotonic() + 5
    while not llm.sent and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(SessionBusy, match="a prompt is already in flight"):
        session.prompt("second")
    session.cancel()
    worker.join(5)
    assert not worker.is_alive()
    assert [m.role for m in client.stored_session(session.id)[1]] == ["user"]


def test_model_and_mode_switches_persist(isolated_home, tmp_path):
    client = make_client(isolated_home, ScriptedLlm([text_reply("a")]))
    session = client.new_session(tmp_path)
    session.prompt("hi")
    session.switch_model("fake", "other-model")
    session.set_mode("architect")
    meta = client.list_sessions()[0]
    assert meta.model == "other-model" and meta.mode == "architect"
    fresh = make_client(isolated_home, ScriptedLlm([]))
    handle, _ = fresh.resume_session(session.id)
    assert handle.config.model == "other-model"
    with pytest.raises(Exception, match="unknown session mode: weird"):
        session.set_mode("weird")


def test_architect_mode_exposes_only_read_only_tools(isolated_home, tmp_path):
    llm = ScriptedLlm([text_reply("a"), text_reply("b")])
    client = make_client(isolated_home, llm, extra="allow_shell = true")
    session = client.new_session(tmp_path)
    session.prompt("x")
    session.set_mode("architect")
    session.prompt("y")
    assert (
        "write_file" in client.state.services.registry.names()
        and "execute_command" in client.state.services.registry.names()
    )


def test_unknown_model_and_bad_ids(isolated_home, tmp_path):
    client = make_client(isolated_home, ScriptedLlm([]))
    with pytest.raises(ConfigError, match="Model 'nope' not found"):
        client.new_session(tmp_path, model="nope")
    with pytest.raises(InvalidArgument, match="invalid session id format"):
        client.session("not-a-uuid")
    with pytest.raises(NotFound, match="session not found"):
        client.session("8b3f0c8e-1111-4222-8333-444455556666")


def test_work_dir_bounds_every_session(isolated_home, tmp_path):
    inside = tmp_path / "proj"
    inside.mkdir()
    client = make_client(isolated_home, ScriptedLlm([]), work_dir=str(inside))
    client.new_session(inside)
    with pytest.raises(InvalidArgument, match="outside the configured work_dir"):
        client.new_session(tmp_path)


def test_unrestorable_provider_falls_back_with_warning(isolated_home, tmp_path):
    client = make_client(isolated_home, ScriptedLlm([text_reply("a")]))
    session = client.new_session(tmp_path)
    session.prompt("hi")
    conv = client.state.services.conversations.history.load(session.id)
    conv.meta.provider = "gone"
    client.state.services.conversations.history.save_meta(conv)
    fresh = make_client(isolated_home, ScriptedLlm([]))
    _, loaded = fresh.resume_session(session.id, tmp_path)
    assert loaded.warning.startswith("[warning] Could not restore this session's provider 'gone'")


class FlakyHistory:
    """Wraps a real HistoryManager; the second append fails like a full disk."""

    def __init__(self, inner):
        self.inner, self.appends = inner, 0

    def append_message(self, conv, message):
        self.appends += 1
        if self.appends == 2:
            raise OSError(28, "No space left on device")
        return self.inner.append_message(conv, message)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_failed_append_falls_back_to_a_full_rewrite(isolated_home, tmp_path):
    client = make_client(isolated_home, ScriptedLlm([tool_reply(("list_dir", {})), text_reply("done")]))
    client.state.services.conversations.history = FlakyHistory(client.state.services.conversations.history)
    session = client.new_session(tmp_path)
    session.prompt("go")
    fresh = make_client(isolated_home, ScriptedLlm([]))
    assert [m.role for m in fresh.stored_session(session.id)[1]] == ["user", "assistant", "tool", "assistant"]


class RunningTurn:
    """A turn whose worker is still running, as far as the session map can tell."""

    running = True
    cancelled = False


def entry(state: SessionState) -> SimpleNamespace:
    """What the map holds for a session: its id and its live state (a Session, less the operations)."""
    return SimpleNamespace(id=state.id, live=state)


def test_session_map_eviction_spares_in_flight_and_held_sessions():
    live = SessionMap(idle_limit=100, capacity=2)
    sessions = [SessionState(f"s{i}", None, Path("/")) for i in range(4)]
    sessions[0].turn = RunningTurn()  # type: ignore[assignment]
    for s in sessions:
        live.insert(entry(s))
    assert len(live) == 2 and "s0" in live and "s3" in live
    sessions[3].last_active -= 1000  # idle past the limit: dropped first
    live.insert(entry(SessionState("new", None, Path("/"))), hold=True)
    assert "s3" not in live and "new" in live
    with pytest.raises(TooManySessions):  # one running, one held by a client: nothing may go
        live.insert(entry(SessionState("more", None, Path("/"))))
    assert "more" not in live and len(live) == 2
    live.let_go("new")
    live.insert(entry(SessionState("more", None, Path("/"))))
    assert "new" not in live and "more" in live and "s0" in live


def test_live_session_rereads_history_another_client_appended(isolated_home, tmp_path):
    llm_a, llm_b = ScriptedLlm([text_reply("a1"), text_reply("a2")]), ScriptedLlm([text_reply("b1")])
    first = make_client(isolated_home, llm_a)
    session = first.new_session(tmp_path)
    session.prompt("from a")
    second = make_client(isolated_home, llm_b)
    handle, _ = second.resume_session(session.id, tmp_path)
    handle.prompt("from b")
    session.prompt("a again")  # the cached conversation is stale: it must be re-read, not diverge
    sent = [m.text() for m in llm_a.sent[-1] if m.role != "system"]
    assert sent == ["from a", "a1", "from b", "b1", "a again"]
    assert len(first.stored_session(session.id)[1]) == 6
