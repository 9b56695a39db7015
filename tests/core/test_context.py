"""ContextFitter: proactive trimming, reactive shrink, exhaustion, calibration, and the never-split rule."""

from __future__ import annotations

import copy
import random

import pytest

from openheim.core.context import (
    ContextFitter,
    FitResult,
    message_bytes,
    omission_note,
    tools_bytes,
    turn_too_large,
)
from openheim.core.models import (
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    Tool,
    ToolUseBlock,
    Usage,
)

RESULT_BYTES = 5000
# sizes by hand: 16 bytes overhead per message plus the payload
USER_SIZE = 16 + 100
CALL_SIZE = 16 + len("c0000") + len("read_file") + len('{"path":"f"}')
RESULT_SIZE = 16 + len("c0000") + len("read_file") + RESULT_BYTES
ANSWER_SIZE = 16 + 100
TURN_SIZE = USER_SIZE + CALL_SIZE + RESULT_SIZE + ANSWER_SIZE


def _turn(i: int, finished: bool = True) -> list[Message]:
    call_id = f"c{i:04d}"
    turn = [
        Message.user(f"user {i:04d} ".ljust(100, ".")),
        Message("assistant", [ToolUseBlock(call_id, "read_file", '{"path":"f"}')]),
        Message.tool_result(call_id, "read_file", "r" * RESULT_BYTES),
    ]
    if finished:
        turn.append(Message.assistant(f"answer {i:04d} ".ljust(100, ".")))
    return turn


def _conversation(turns: int) -> list[Message]:
    history: list[Message] = []
    for i in range(turns - 1):
        history += _turn(i)
    return history + _turn(turns - 1, finished=False)  # the current turn: a tool call just answered


def _window_for(budget_bytes: int) -> int:
    return int(budget_bytes / (0.9 * 4)) + 1


def _assert_pairs_intact(messages: list[Message]) -> None:
    calls = {c.id for m in messages for c in m.tool_calls()}
    results = {m.tool_result_block().tool_call_id for m in messages if m.role == "tool"}  # type: ignore[union-attr]
    assert calls == results


def _dump(messages: list[Message]) -> list[dict]:
    return [m.to_dict() for m in messages]


def test_sizes_match_the_hand_computed_ones() -> None:
    history = _turn(7)
    assert [message_bytes(m) for m in history] == [USER_SIZE, CALL_SIZE, RESULT_SIZE, ANSWER_SIZE]


def test_estimate_of_every_block_kind() -> None:
    message = Message(
        "assistant",
        [
            TextBlock("héllo"),
            ThinkingBlock("think", "sig"),
            RedactedThinkingBlock("rd"),
            ImageBlock("AAAA", "image/png"),
            ToolUseBlock("i", "n", "{}", "s"),
        ],
    )
    assert message_bytes(message) == 16 + 6 + (5 + 3) + 2 + 6000 + (1 + 1 + 2 + 1)


def test_no_window_sends_everything_unchanged() -> None:
    history = _conversation(200)
    system = Message.system("sys")
    result = ContextFitter(None).fit(history, system, [])
    assert result.dropped == 0 and result.messages[0] is system
    assert all(a is b for a, b in zip(result.messages[1:], history)) and len(result.messages) == len(history) + 1
    assert not result.exhausted
    assert result.sent_bytes == message_bytes(system) + 199 * TURN_SIZE + TURN_SIZE - ANSWER_SIZE


def test_200_turns_trimmed_to_the_budget() -> None:
    history = _conversation(200)
    before = _dump(history)
    kept_turns = 37
    note = omission_note((200 - kept_turns) * 4)
    budget = (kept_turns - 1) * TURN_SIZE + (TURN_SIZE - ANSWER_SIZE) + len(note)
    fitter = ContextFitter(_window_for(budget))
    assert budget <= fitter.budget() < budget + TURN_SIZE  # one more turn would not fit
    result = fitter.fit(history, None, [])
    assert result.dropped == (200 - kept_turns) * 4
    assert result.sent_bytes <= fitter.budget() and not result.exhausted
    first = result.messages[0]
    assert first.role == "user" and first.content[0] == TextBlock(note)
    assert note == f"[{result.dropped} earlier messages omitted to fit the context window]"
    assert first.content[1:] == history[result.dropped].content
    assert result.messages[1:] == history[result.dropped + 1 :]
    _assert_pairs_intact(result.messages)
    assert _dump(history) == before  # the stored history is untouched
    assert len(history[result.dropped].content) == 1


def test_fixed_bytes_of_system_and_tools_are_counted() -> None:
    history = _conversation(50)
    system = Message.system("s" * 3000)
    tools = [Tool("read_file", "Read a file " * 50, {"type": "object", "properties": {}})]
    fixed = message_bytes(system) + tools_bytes(tools)
    bare = ContextFitter(_window_for(10 * TURN_SIZE)).fit(history, None, [])
    loaded = ContextFitter(_window_for(10 * TURN_SIZE)).fit(history, system, tools)
    assert loaded.dropped > bare.dropped and loaded.messages[0] is system
    assert loaded.sent_bytes == fixed + sum(message_bytes(m) for m in loaded.messages[1:])


def test_reactive_shrink_on_overflow() -> None:
    history = _conversation(200)
    fitter = ContextFitter(None)
    first = fitter.fit(history, None, [])
    assert first.dropped == 0
    assert fitter.on_overflow(first) is True
    assert fitter.overflow_limit == int(first.sent_bytes * 0.75)
    second = fitter.fit(history, None, [])
    assert second.dropped > 0 and second.sent_bytes <= first.sent_bytes * 0.75
    _assert_pairs_intact(second.messages)
    assert fitter.on_overflow(second) is True
    third = fitter.fit(history, None, [])
    assert third.sent_bytes <= second.sent_bytes * 0.75 and third.dropped > second.dropped
    assert fitter.on_overflow(third) is False  # two retries per call at most
    fitter.reset_call()
    assert fitter.on_overflow(third) is True
    assert fitter.overflow_limit == int(third.sent_bytes * 0.75)  # min of the learned limits


def test_learned_limit_only_ever_shrinks() -> None:
    fitter = ContextFitter(None)
    fitter.on_overflow(FitResult([], 0, 1000, False))
    fitter.reset_call()
    fitter.on_overflow(FitResult([], 0, 4000, False))
    assert fitter.overflow_limit == 750


def test_exhausted_when_only_the_current_turn_is_left() -> None:
    history = _conversation(5)
    fitter = ContextFitter(_window_for(100))  # far too small even for one turn
    result = fitter.fit(history, None, [])
    assert result.exhausted and result.dropped == 16
    assert result.messages[0].content[0] == TextBlock(omission_note(16))
    assert fitter.on_overflow(result) is False and fitter.overflow_limit is None
    assert "start a new session" in str(turn_too_large("HTTP 400: prompt is too long"))


def test_single_turn_is_never_cut() -> None:
    history = _turn(0, finished=False) + [
        Message("assistant", [ToolUseBlock("x", "y", "{}")]),
        Message.tool_result("x", "y", "z" * 50000),
    ]
    result = ContextFitter(_window_for(10)).fit(history, None, [])
    assert result.dropped == 0 and result.exhausted and result.messages == history


def test_never_cuts_at_index_zero_or_without_users() -> None:
    history = [Message.assistant("a" * 5000), Message.user("u" * 10), Message.assistant("b")]
    result = ContextFitter(_window_for(100)).fit(history, None, [])
    assert result.dropped == 1 and result.exhausted
    no_users = [Message.assistant("a" * 5000)] * 3
    result = ContextFitter(_window_for(100)).fit(no_users, None, [])
    assert result.dropped == 0 and result.exhausted


def test_calibration_changes_the_budget_and_is_clamped() -> None:
    fitter = ContextFitter(1000)
    assert fitter.budget() == 3600
    fitter.calibrate(20000, Usage(input_tokens=4000, cache_read_tokens=1000, output_tokens=999))
    assert fitter.bytes_per_token == 4.0 and fitter.budget() == 3600
    fitter.calibrate(10000, Usage(input_tokens=1000))
    assert fitter.bytes_per_token == 8.0
    fitter.calibrate(10, Usage(input_tokens=1000))
    assert fitter.bytes_per_token == 1.0
    fitter.calibrate(3000, Usage(input_tokens=500, cache_creation_tokens=500))
    assert fitter.bytes_per_token == 3.0 and fitter.budget() == 2700
    fitter.calibrate(3000, Usage())
    assert fitter.bytes_per_token == 3.0


def test_overflow_limit_caps_the_window_budget() -> None:
    fitter = ContextFitter(1_000_000)
    fitter.on_overflow(FitResult([], 0, 8000, False))
    assert fitter.budget() == 6000


@pytest.mark.parametrize("seed", range(20))
def test_random_histories_keep_every_invariant(seed: int) -> None:
    rng = random.Random(seed)
    history: list[Message] = []
    for i in range(rng.randint(1, 60)):
        history.append(Message.user("u" * rng.randint(0, 3000)))
        for j in range(rng.randint(0, 3)):
            calls = [ToolUseBlock(f"c{i}-{j}-{k}", "t", "{}") for k in range(rng.randint(1, 3))]
            history.append(Message("assistant", [TextBlock("thinking aloud"), *calls]))
            history += [Message.tool_result(c.id, "t", "r" * rng.randint(0, 9000)) for c in calls]
        if rng.random() < 0.8:
            history.append(Message.assistant("done"))
    before = copy.deepcopy(_dump(history))
    fitter = ContextFitter(rng.choice([None, 500, 5000, 50000]))
    for _ in range(3):
        result = fitter.fit(history, None, [])
        kept = result.messages
        latest_user = max(i for i, m in enumerate(history) if m.role == "user")
        assert result.dropped <= latest_user and len(kept) == len(history) - result.dropped
        assert kept[1:] == history[result.dropped + 1 :]
        if result.dropped:
            assert history[result.dropped].role == "user"
            assert kept[0].content[0] == TextBlock(omission_note(result.dropped))
        assert result.exhausted == (result.dropped == latest_user)
        _assert_pairs_intact(kept)
        if not fitter.on_overflow(result):
            break
    assert _dump(history) == before
