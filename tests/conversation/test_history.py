"""HistoryManager: metadata + append-only log, torn lines, divergence, listing, deletion."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from openheim.conversation.history import ConversationMeta, HistoryManager, title_from
from openheim.conversation.log_reader import parse_log
from openheim.core.models import Message, ThinkingBlock, ToolUseBlock, Usage
from openheim.errors import HistoryDiverged, InvalidArgument, NotFound, ParseError


@pytest.fixture
def hm(tmp_path: Path) -> HistoryManager:
    return HistoryManager(tmp_path / "history")


def _append(hm: HistoryManager, conv, message: Message) -> None:
    conv.messages.append(message)
    hm.append_message(conv, message)


def _tool_turn(i: int) -> list[Message]:
    call = ToolUseBlock(f"call{i}", "read_file", '{"path": "a.txt"}')
    return [
        Message.user(f"question {i}"),
        Message("assistant", [ThinkingBlock("hmm", "sig"), call]),
        Message.tool_result(f"call{i}", "read_file", "contents\nwith ünïcode", is_error=i % 2 == 0),
        Message.assistant(f"answer {i}"),
    ]


def test_create_saves_meta_immediately(hm: HistoryManager) -> None:
    conv = hm.create(model="m1", provider="p1", skills=["a", "b", "a"], cwd="/w")
    doc = json.loads(hm.meta_path(conv.id).read_text())
    meta = doc["meta"]
    assert meta["id"] == conv.id and len(conv.id) == 36
    assert (meta["model"], meta["provider"], meta["skills"], meta["cwd"]) == ("m1", "p1", ["a", "b"], "/w")
    assert meta["mode"] == "code" and meta["created_at"].endswith("Z")
    assert "title" not in meta and "context_usage" not in meta
    assert hm.exists(conv.id)


def test_create_with_given_id_and_refuses_existing(hm: HistoryManager) -> None:
    conv = hm.create("abc-123")
    assert conv.id == "abc-123"
    with pytest.raises(InvalidArgument):
        hm.create("abc-123")


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "a\0b", "x" * 200])
def test_bad_ids_rejected(hm: HistoryManager, bad: str) -> None:
    with pytest.raises(InvalidArgument, match="invalid session id format"):
        hm.load(bad)


def test_round_trip_append_and_load(hm: HistoryManager) -> None:
    conv = hm.create(model="m")
    messages = _tool_turn(1) + _tool_turn(2)
    for m in messages:
        _append(hm, conv, m)
    assert conv.persisted == len(messages)
    hm.save_meta(conv)
    loaded = hm.load(conv.id)
    assert [m.to_dict() for m in loaded.messages] == [m.to_dict() for m in messages]
    assert loaded.persisted == len(messages)
    assert loaded.meta.title == "question 1"
    lines = hm.log_path(conv.id).read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(messages) and all(": " not in line[:12] for line in lines)  # compact JSON


def test_title_is_first_80_chars_of_first_user_text(hm: HistoryManager) -> None:
    conv = hm.create()
    _append(hm, conv, Message.assistant("not me"))
    _append(hm, conv, Message.user("é" * 100))
    _append(hm, conv, Message.user("later"))
    hm.save_meta(conv)
    assert hm.load(conv.id).meta.title == "é" * 80
    assert title_from([Message.user("")]) is None


def test_meta_fields_survive_reload(hm: HistoryManager) -> None:
    conv = hm.create(model="m", provider="p")
    conv.meta.mode = "architect"
    conv.meta.context_usage = Usage(10, 2, 3, 4)
    conv.meta.model = "m2"
    hm.save_meta(conv)
    meta = hm.load(conv.id).meta
    assert (meta.mode, meta.model, meta.context_usage) == ("architect", "m2", Usage(10, 2, 3, 4))


def test_save_meta_bumps_updated_at_and_is_atomic(hm: HistoryManager) -> None:
    conv = hm.create()
    before = conv.meta.updated_at
    time.sleep(0.002)
    hm.save_meta(conv)
    assert conv.meta.updated_at > before
    leftovers = [p.name for p in hm.dir.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_load_missing_is_not_found(hm: HistoryManager) -> None:
    with pytest.raises(NotFound, match=r"Conversation nope not found at .*nope\.json"):
        hm.load("nope")


def test_load_without_log_is_empty(hm: HistoryManager) -> None:
    conv = hm.create()
    assert hm.log_path(conv.id).read_bytes() == b""
    hm.log_path(conv.id).unlink()
    loaded = hm.load(conv.id)
    assert loaded.messages == []
    _append(hm, loaded, Message.user("a"))
    assert hm.load(conv.id).messages[0].text() == "a"


def test_create_replaces_a_stray_log(hm: HistoryManager) -> None:
    hm.dir.mkdir(parents=True)
    hm.log_path("stray").write_text(Message.user("orphan").to_json() + "\n")
    conv = hm.create("stray")
    _append(hm, conv, Message.user("fresh"))
    assert [m.text() for m in hm.load("stray").messages] == ["fresh"]


def test_resolve_loads_or_creates(hm: HistoryManager) -> None:
    new = hm.resolve(model="m", skills=["s"])
    assert new.meta.model == "m" and new.meta.skills == ["s"]
    _append(hm, new, Message.user("a"))
    again = hm.resolve(new.id, model="other")
    assert again.meta.model == "m" and len(again.messages) == 1
    named = hm.resolve("given-id", model="x")
    assert named.id == "given-id" and named.meta.model == "x" and hm.exists("given-id")


def test_corrupt_meta_is_a_parse_error(hm: HistoryManager) -> None:
    conv = hm.create()
    hm.meta_path(conv.id).write_text("{not json")
    with pytest.raises(ParseError, match="restore or delete"):
        hm.load(conv.id)


def test_list_newest_first_skipping_corrupt(hm: HistoryManager) -> None:
    a = hm.create()
    b = hm.create()
    c = hm.create()
    for conv in (b, a):
        time.sleep(0.002)
        hm.save_meta(conv)
    (hm.dir / "junk.json").write_text("[]")
    (hm.dir / "badusage.json").write_text(json.dumps({"meta": {"id": "x", "context_usage": "lots"}}))
    (hm.dir / "bad name.json").write_text(json.dumps({"meta": {"id": "bad name"}}))
    hm.log_path(c.id).write_text("garbage that would fail if read\n" * 3)
    assert [m.id for m in hm.list()] == [a.id, b.id, c.id]
    assert all(isinstance(m, ConversationMeta) for m in hm.list())


def test_list_empty_dir_missing(tmp_path: Path) -> None:
    hm = HistoryManager(tmp_path / "none")
    assert hm.list() == [] and hm.history_dir == tmp_path / "none"


def test_delete_removes_all_files(hm: HistoryManager) -> None:
    conv = hm.create()
    _append(hm, conv, Message.user("hi"))
    hm.lock_path(conv.id).write_text("{}")
    hm.delete(conv.id)
    assert not any(hm.dir.iterdir())
    with pytest.raises(NotFound, match=f"Conversation {conv.id} not found"):
        hm.delete(conv.id)


def test_blank_lines_skipped(hm: HistoryManager) -> None:
    conv = hm.create()
    lines = [Message.user("a").to_json(), "", "   ", Message.assistant("b").to_json(), "", ""]
    hm.log_path(conv.id).write_text("\n".join(lines))
    loaded = hm.load(conv.id)
    assert [m.text() for m in loaded.messages] == ["a", "b"]
    _append(hm, loaded, Message.user("c"))
    assert [m.text() for m in hm.load(conv.id).messages] == ["a", "b", "c"]


def test_torn_last_line_dropped_with_warning_then_cut_on_append(hm: HistoryManager, caplog) -> None:
    conv = hm.create()
    for m in _tool_turn(1):
        _append(hm, conv, m)
    whole = hm.log_path(conv.id).read_bytes()
    torn = Message.assistant("this line was being written when the process died").to_json().encode()[:25]
    hm.log_path(conv.id).write_bytes(whole + torn)
    loaded = hm.load(conv.id)
    assert len(loaded.messages) == 4 and "torn" in caplog.text
    _append(hm, loaded, Message.user("after the crash"))
    assert hm.log_path(conv.id).read_bytes() == whole + Message.user("after the crash").to_json().encode() + b"\n"
    assert [m.text() for m in hm.load(conv.id).messages][-1] == "after the crash"


def test_last_line_without_newline_still_appends_cleanly(hm: HistoryManager) -> None:
    conv = hm.create()
    hm.log_path(conv.id).write_text(Message.user("a").to_json())
    loaded = hm.load(conv.id)
    _append(hm, loaded, Message.assistant("b"))
    assert [m.text() for m in hm.load(conv.id).messages] == ["a", "b"]


def test_unparseable_earlier_line_is_skipped_with_a_warning(hm: HistoryManager, caplog) -> None:
    conv = hm.create()
    hm.log_path(conv.id).write_text("\n".join([Message.user("a").to_json(), "{oops", Message.user("b").to_json()]))
    assert [m.text() for m in hm.load(conv.id).messages] == ["a", "b"]
    assert "skipping line 2 of" in caplog.text


def test_invalid_message_shape_in_middle_is_skipped(caplog) -> None:
    data = (
        b'{"role":"robot","content":[]}\n{"role":"user","content":[{"type":"text","text":5}]}\n'
        + b"[" * 100_000
        + b"]" * 100_000
        + b'\n{"role":"user","content":[]}\n'
    )
    assert [m.role for m in parse_log(data).messages] == ["user"]
    assert "line 1" in caplog.text and "line 2" in caplog.text and "nested too deeply" in caplog.text


def test_parse_log_offsets() -> None:
    a, b = Message.user("a").to_json().encode(), Message.user("b").to_json().encode()
    read = parse_log(a + b"\n" + b + b"\n" + b"{torn")
    assert (len(read.messages), read.size, read.needs_newline, read.torn) == (2, len(a) + len(b) + 2, False, True)
    assert parse_log(b"").messages == [] and parse_log(b"\n\n").size == 0


def test_append_detects_lines_written_by_someone_else(hm: HistoryManager) -> None:
    conv = hm.create()
    _append(hm, conv, Message.user("a"))
    other = hm.load(conv.id)
    _append(hm, other, Message.assistant("from the other process"))
    with pytest.raises(HistoryDiverged):
        _append(hm, conv, Message.assistant("mine"))


def test_append_detects_a_shrunk_log(hm: HistoryManager) -> None:
    conv = hm.create()
    _append(hm, conv, Message.user("a"))
    hm.log_path(conv.id).write_bytes(b"")
    with pytest.raises(HistoryDiverged):
        _append(hm, conv, Message.user("b"))


def test_save_conversation_rewrites_when_disk_is_a_prefix(hm: HistoryManager) -> None:
    conv = hm.create()
    _append(hm, conv, Message.user("a"))
    conv.messages += [Message.assistant("b"), Message.user("c")]  # appends that failed
    hm.save_conversation(conv)
    loaded = hm.load(conv.id)
    assert [m.text() for m in loaded.messages] == ["a", "b", "c"]
    assert conv.persisted == 3 and loaded.meta.title == "a"
    _append(hm, conv, Message.assistant("d"))
    assert len(hm.load(conv.id).messages) == 4


def test_save_conversation_refuses_when_diverged(hm: HistoryManager) -> None:
    conv = hm.create()
    _append(hm, conv, Message.user("a"))
    other = hm.load(conv.id)
    _append(hm, other, Message.assistant("other"))
    conv.messages.append(Message.assistant("mine"))
    with pytest.raises(HistoryDiverged, match=f"conversation {conv.id} was modified by another process"):
        hm.save_conversation(conv)
    shorter = hm.load(conv.id)
    shorter.messages.pop()
    with pytest.raises(HistoryDiverged):
        hm.save_conversation(shorter)


def test_save_conversation_ignores_a_torn_tail(hm: HistoryManager) -> None:
    conv = hm.create()
    _append(hm, conv, Message.user("a"))
    with open(hm.log_path(conv.id), "ab") as f:
        f.write(b'{"role":"assis')
    conv.messages.append(Message.assistant("b"))
    hm.save_conversation(conv)
    assert [m.text() for m in hm.load(conv.id).messages] == ["a", "b"]


def test_meta_ignores_unknown_fields_and_tolerates_missing(hm: HistoryManager) -> None:
    hm.dir.mkdir(parents=True)
    hm.meta_path("x1").write_text(json.dumps({"meta": {"id": "x1", "future": 1}}))
    meta = hm.load("x1").meta
    assert (meta.id, meta.skills, meta.mode, meta.model) == ("x1", [], "code", None)


def test_log_size_tracks_the_file(hm: HistoryManager) -> None:
    conv = hm.create()
    _append(hm, conv, Message.user("a"))
    assert os.stat(hm.log_path(conv.id)).st_size == conv.log_size


def test_list_filters_by_exact_cwd(hm: HistoryManager) -> None:
    a = hm.create(cwd="/w/a")
    hm.create(cwd="/w/a/sub")
    assert [m.id for m in hm.list(cwd="/w/a")] == [a.id]
    assert hm.list(cwd="/nowhere") == []


def test_append_never_rereads_the_log(hm: HistoryManager, monkeypatch) -> None:
    conv = hm.create()
    for m in _tool_turn(1):
        _append(hm, conv, m)
    loaded = hm.load(conv.id)

    def boom(*args, **kwargs):
        raise AssertionError("the log was re-read")

    monkeypatch.setattr("openheim.conversation.history.parse_log", boom)
    monkeypatch.setattr(Path, "read_bytes", boom)
    monkeypatch.setattr(Path, "read_text", boom)
    for m in _tool_turn(2):
        _append(hm, loaded, m)
    monkeypatch.undo()
    assert len(hm.load(conv.id).messages) == 8


_UNREADABLE_LINES = [
    pytest.param(
        b'{"role":"user","content":[{"type":"document","source":{"type":"text","data":"x"}}]}\n', id="newer-block-type"
    ),
    pytest.param(b'{"role":"assistant","content":[{"type":"text","text":"hi","citations":[]}]}\n', id="extra-key"),
    pytest.param(b"garbage that ends with a newline\n", id="garbage"),
    pytest.param(b"{oops\n\n  \n", id="garbage-then-blank-lines"),
]


@pytest.mark.parametrize("line", _UNREADABLE_LINES)
def test_a_complete_last_line_that_cannot_be_read_is_skipped_and_kept(hm: HistoryManager, line: bytes, caplog) -> None:
    """Only a last line without its newline is a torn write; a complete one is skipped with a warning, but never
    dropped or cut from the file (a rewrite refuses)."""
    conv = hm.create()
    _append(hm, conv, Message.user("a"))
    _append(hm, conv, Message.assistant("b"))
    before = hm.log_path(conv.id).read_bytes() + line
    hm.log_path(conv.id).write_bytes(before)
    assert [m.text() for m in hm.load(conv.id).messages] == ["a", "b"]
    assert "skipping line 3 of" in caplog.text and "left in the file" in caplog.text
    with pytest.raises(ParseError, match=r"line 3 of .*upgrade openheim.*left untouched") as info:
        hm.save_conversation(conv)
    assert "\n" not in str(info.value)
    assert hm.log_path(conv.id).read_bytes() == before


@pytest.mark.parametrize("line", _UNREADABLE_LINES)
def test_an_append_never_cuts_a_complete_line_someone_else_wrote(hm: HistoryManager, line: bytes) -> None:
    conv = hm.create()
    _append(hm, conv, Message.user("a"))
    with open(hm.log_path(conv.id), "ab") as f:
        f.write(line)
    before = hm.log_path(conv.id).read_bytes()
    with pytest.raises(HistoryDiverged):
        _append(hm, conv, Message.assistant("mine"))
    assert hm.log_path(conv.id).read_bytes() == before


@pytest.mark.parametrize(
    "field, value",
    [
        ("updated_at", 5),
        ("updated_at", ["x"]),
        ("created_at", {"a": 1}),
        ("title", 3),
        ("model", 1.5),
        ("provider", True),
        ("cwd", []),
        ("mode", 7),
    ],
)
def test_list_skips_metadata_with_a_non_string_field(hm: HistoryManager, field: str, value, caplog) -> None:
    good = hm.create()
    bad = hm.create()
    doc = json.loads(hm.meta_path(bad.id).read_text())
    doc["meta"][field] = value
    hm.meta_path(bad.id).write_text(json.dumps(doc))
    assert [m.id for m in hm.list()] == [good.id]
    assert field in caplog.text and str(hm.meta_path(bad.id)) in caplog.text
    with pytest.raises(ParseError, match=f"'{field}' must be a string"):
        hm.load(bad.id)


@pytest.mark.parametrize("kind", [["text"], {"t": 1}, None, "video"])
def test_a_block_of_an_unknown_or_malformed_type_is_a_value_error(kind):
    """block_from_dict's contract: a list as the type was an unhashable-type TypeError before."""
    with pytest.raises(ValueError, match="unknown content block type"):
        Message.from_dict({"role": "user", "content": [{"type": kind, "text": "hi"}]})
