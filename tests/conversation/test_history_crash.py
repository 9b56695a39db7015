"""Crash safety of the message log: a writer killed with SIGKILL loses at most the line it was writing."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from openheim.conversation.history import HistoryManager
from openheim.core.models import Message

ROOT = Path(__file__).resolve().parents[2]

_WRITER = r"""
import sys
from openheim.core.models import Message
from openheim.conversation.history import HistoryManager
hm = HistoryManager(sys.argv[1])
conv = hm.load(sys.argv[2])
start = len(conv.messages)
for i in range(start, start + 100000):
    m = Message.user(f"message {i} " + "x" * (i % 5000))
    conv.messages.append(m)
    hm.append_message(conv, m)
    print(i, flush=True)
"""


def _expected(i: int) -> str:
    return f"message {i} " + "x" * (i % 5000)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkilled_writer_never_corrupts_the_log(tmp_path: Path) -> None:
    hm = HistoryManager(tmp_path / "history")
    conv = hm.create()
    rng = random.Random(5)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(hm.dir), conv.id], stdout=subprocess.PIPE, env=env, text=True
        )
        assert child.stdout is not None
        confirmed = -1
        target = rng.randint(1, 40)
        for line in child.stdout:
            confirmed = int(line)
            if confirmed >= len(conv.messages) + target:
                break
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        loaded = hm.load(conv.id)
        texts = [m.text() for m in loaded.messages]
        assert len(texts) >= confirmed + 1  # every confirmed (written) message survived
        assert texts == [_expected(i) for i in range(len(texts))]
        conv = loaded
    extra = Message.assistant("the parent resumes")
    conv.messages.append(extra)
    hm.append_message(conv, extra)
    assert hm.load(conv.id).messages[-1].text() == "the parent resumes"


def test_every_torn_prefix_of_a_line_is_dropped_and_repaired(tmp_path: Path) -> None:
    hm = HistoryManager(tmp_path / "history")
    conv = hm.create()
    first = Message.user("kept")
    conv.messages.append(first)
    hm.append_message(conv, first)
    good = hm.log_path(conv.id).read_bytes()
    line = Message.assistant("lost in the crash ünïcode").to_json().encode()
    for cut in range(1, len(line)):
        hm.log_path(conv.id).write_bytes(good + line[:cut])
        loaded = hm.load(conv.id)
        assert [m.text() for m in loaded.messages] == ["kept"], cut
        resumed = Message.user(f"resumed {cut}")
        loaded.messages.append(resumed)
        hm.append_message(loaded, resumed)
        assert [m.text() for m in hm.load(conv.id).messages] == ["kept", f"resumed {cut}"]
