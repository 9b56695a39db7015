"""SSE framing over raw byte chunks: splits, CRLF, comments, UTF-8 across writes, the line-length guard."""

from __future__ import annotations

import logging

import pytest

from openheim.core.llm.sse import EventStream, iter_sse, parse_json
from openheim.errors import ParseError


def events(*chunks: bytes) -> list[tuple[str, str]]:
    return list(iter_sse(iter(chunks)))


def test_plain_data_events_default_to_message():
    assert events(b'data: {"a":1}\n\ndata: [DONE]\n\n') == [("message", '{"a":1}'), ("message", "[DONE]")]


def test_named_events_and_crlf():
    got = events(b'event: ping\r\ndata: {}\r\n\r\nevent: message_stop\r\ndata: {"type":"message_stop"}\r\n\r\n')
    assert got == [("ping", "{}"), ("message_stop", '{"type":"message_stop"}')]


def test_event_split_at_every_byte():
    raw = "event: x\ndata: héllo — 日本\n\n".encode()
    assert events(*[raw[i : i + 1] for i in range(len(raw))]) == [("x", "héllo — 日本")]


def test_multibyte_character_split_across_chunks():
    raw = "data: 日本語\n\n".encode()
    cut = raw.index("本".encode()) + 1  # in the middle of a 3-byte character
    assert events(raw[:cut], raw[cut:]) == [("message", "日本語")]


def test_crlf_split_between_chunks():
    assert events(b"data: a\r", b"\n\r\n", b"data: b\r\n\r", b"\n") == [("message", "a"), ("message", "b")]


def test_comments_and_keepalives_are_skipped():
    got = events(b": OPENROUTER PROCESSING\n\n", b":\n\n", b'data: {"x":1}\n\n')
    assert got == [("message", '{"x":1}')]


def test_multiline_data_joined_with_newline():
    assert events(b"data: a\ndata: b\n\n") == [("message", "a\nb")]


def test_unterminated_last_event_still_dispatched():
    assert events(b'data: {"last":true}') == [("message", '{"last":true}')]


def test_data_without_space_after_colon():
    assert events(b"data:[DONE]\n\n") == [("message", "[DONE]")]


def test_unknown_fields_ignored():
    assert events(b"id: 7\nretry: 100\nfoo: bar\ndata: x\n\n") == [("message", "x")]


def test_line_longer_than_one_mebibyte_fails():
    chunks = [b"data: " + b"x" * 600_000, b"y" * 600_000]
    with pytest.raises(ParseError, match="stream line longer than 1048576 bytes"):
        list(iter_sse(iter(chunks)))


def test_long_but_terminated_lines_pass_the_guard():
    chunks = [b"data: " + b"x" * 900_000 + b"\n\n", b"data: " + b"y" * 900_000 + b"\n\n"]
    assert [len(d) for _, d in iter_sse(iter(chunks))] == [900_000, 900_000]


def test_guard_counts_across_chunks():
    with pytest.raises(ParseError):
        list(EventStream(iter([b"data: a\n\n" + b"data: " + b"b" * 60, b"c" * 60]), max_line=100))


def test_parse_json_skips_invalid_payload_with_warning(caplog):
    caplog.set_level(logging.WARNING)
    assert parse_json('{"ok": 1}') == {"ok": 1}
    assert parse_json("not json " + "z" * 500) is None
    assert "not valid JSON" in caplog.text
    assert "z" * 191 in caplog.text and "z" * 300 not in caplog.text


# --- framing without blank lines, caps, bad bytes -------------------------------------------------


def test_back_to_back_data_lines_are_separate_events():
    raw = b'data: {"a":1}\ndata: {"b":2}\ndata: [DONE]\n'
    assert events(raw) == [("message", '{"a":1}'), ("message", '{"b":2}'), ("message", "[DONE]")]


def test_back_to_back_named_events_keep_their_names():
    raw = b'event: one\ndata: {"n":1}\nevent: two\ndata: {"n":2}\n'
    assert events(*[raw[i : i + 3] for i in range(0, len(raw), 3)]) == [("one", '{"n":1}'), ("two", '{"n":2}')]


def test_multi_line_json_then_back_to_back_events():
    raw = b'data: {"a":\ndata: 1}\n\ndata: {"b":2}\ndata: {"c":3}\n\n'
    assert events(raw) == [("message", '{"a":\n1}'), ("message", '{"b":2}'), ("message", '{"c":3}')]


def test_comments_between_back_to_back_events_do_not_join_them():
    assert events(b'data: {"a":1}\n: ping\ndata: {"b":2}\n') == [("message", '{"a":1}'), ("message", '{"b":2}')]


def test_invalid_utf8_becomes_replacement_characters():
    assert events(b"data: caf\xe9\n\n") == [("message", "caf\ufffd")]


def test_an_event_over_the_cap_fails_early():
    line = b"data: " + b"x" * 8000 + b"\n"
    chunks = iter([line] * 10_000)  # ~80 MB if it were all read
    with pytest.raises(ParseError, match="larger than 1 MiB"):
        list(EventStream(chunks, max_event=1 << 20))
    assert len(list(chunks)) > 9_000  # it stopped reading at the cap


def test_big_events_take_linear_time():
    import time

    def seconds(mib: int) -> float:
        line = b"data: " + b"y" * (512 * 1024 - 7) + b"\n"
        start = time.process_time()
        assert len(events(*([line] * (2 * mib)), b"\n")[0][1]) > (mib - 1) << 20
        return time.process_time() - start

    small, big = seconds(2), seconds(8)
    assert big < 0.5 or big < small * 8  # quadratic framing would make this 16x


# --- time without content -------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _timed(clock: Clock, pieces: list[tuple[float, bytes]]):
    for at, chunk in pieces:
        clock.now = at
        yield chunk


def test_only_comments_for_longer_than_the_limit_is_quiet():
    from openheim.core.llm.sse import EventFrames
    from openheim.errors import TransportError

    clock = Clock()
    pieces = [
        (1.0, b": ping\n\n"),
        (2.0, b'data: {"a":1}\n\n'),
        (3.0, b": ping\n"),
        (4.0, b"\n: pi"),
        (4.5, b"ng\n\n"),
        (5.5, b": ping\n\n"),
    ]
    frames = EventFrames(_timed(clock, pieces), idle_secs=3.0, clock=clock)
    with pytest.raises(TransportError, match=r"only keep-alive comments for 3 s \(timeout_secs\)"):
        list(frames)
    assert clock.now == 5.5  # 3.5 s after the last content, not before


def test_content_and_partial_lines_keep_a_stream_alive():
    from openheim.core.llm.sse import EventFrames

    clock = Clock()
    pieces = [(2.0, b": ping\n\n"), (4.0, b'data: {"a"'), (6.0, b":1}\n\n"), (8.0, b": ping\n\n")]
    frames = EventFrames(_timed(clock, pieces), idle_secs=2.5, clock=clock)
    assert [f.strip() for f in frames] == [b'data: {"a":1}']
