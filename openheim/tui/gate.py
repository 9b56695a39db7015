"""The chat's permission questions: each arrives as a PermissionAsked event of the turn and waits here,
oldest first, until the person answers it. Everything happens on the UI thread: nothing polls or locks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openheim.core.permission import Decision

if TYPE_CHECKING:
    from openheim.core.permission import Question


class Questions:
    """Open questions, shown one at a time; closing the chat rejects every one still open (fail-closed)."""

    def __init__(self) -> None:
        self._open: list[Question] = []
        self._closed = False

    def add(self, question: Question) -> None:
        if self._closed:
            question.answer(Decision.REJECT_ONCE)
        else:
            self._open.append(question)

    def current(self) -> Question | None:
        """The question to show now: the oldest one nobody has answered (a cancelled turn answers its own)."""
        self._open = [q for q in self._open if not q.answered]
        return self._open[0] if self._open else None

    def waiting(self) -> int:
        return sum(1 for q in self._open if not q.answered)

    def answer(self, question: Question, decision: Decision) -> None:
        question.answer(decision)

    def close(self) -> None:
        """The chat is going away: every open and later question is rejected."""
        self._closed = True
        for question in self._open:
            question.answer(Decision.REJECT_ONCE)
        self._open.clear()
