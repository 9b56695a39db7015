"""`sessions show` of a reply cut short: one assistant entry, the interruption as a note under it, and a
final newline (the run's own mark from core.agent, stored as the agent stores it)."""

from __future__ import annotations

from cli_helpers import openheim

from openheim.conversation.history import HistoryManager
from openheim.core.agent import INTERRUPTED_MARK
from openheim.core.models import Message, TextBlock


def test_an_interrupted_reply_is_one_entry_with_a_note(isolated_home):
    history = HistoryManager(isolated_home / "history")
    conv = history.create(model="fake-model", provider="fake")
    history.append_message(conv, Message("user", [TextBlock("tell me a long story")]))
    mark = INTERRUPTED_MARK.format(why="stopped by the user")
    history.append_message(conv, Message("assistant", [TextBlock("echo: a fairly long "), TextBlock(mark)]))
    history.save_meta(conv)
    shown = openheim("sessions", "show", conv.id)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("assistant:") == 1
    lines = shown.stdout.splitlines()
    reply = next(i for i, line in enumerate(lines) if line.startswith("assistant:"))
    assert lines[reply] == "assistant: echo: a fairly long"
    assert lines[reply + 1] == (
        "  (note) Reply interrupted: stopped by the user. The text above is what had been streamed."
    )
    assert shown.stdout.endswith("\n")
