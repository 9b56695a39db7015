"""The interactive front ends' permission gate: a question is an event of the turn, answered by the front end."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openheim.core.events import PermissionAsked
from openheim.core.permission import Decision, FailClosedGate, PermissionRequest, Question

if TYPE_CHECKING:
    from openheim.core.cancel import CancelToken


class AskTheFrontEnd(FailClosedGate):
    """The interactive front ends' gate (the chat, ACP, serve): each call becomes a ``PermissionAsked``
    event of the turn, and the front end answers the question it carries.

    The fail-closed rules live here, for every front end: a cancelled turn, a front end that fails or
    answers with anything but a Decision rejects the call; nothing runs without an answer.
    """

    def __init__(self, emit: Callable[[Any], None] | None = None) -> None:
        self.emit = emit  # the turn's event sink; the runtime binds a copy of this gate to each turn

    def for_turn(self, emit: Callable[[Any], None]) -> AskTheFrontEnd:
        """A gate that asks through ``emit`` (the runtime calls it when a turn starts)."""
        bound = type(self)(emit)
        bound.__dict__.update({k: v for k, v in self.__dict__.items() if k != "emit"})
        return bound

    def ask(self, req: PermissionRequest, cancel: CancelToken | None) -> Decision | None:
        if self.emit is None:  # not bound to a turn: nobody to ask
            return None
        question = Question(req)
        self.emit(PermissionAsked(question))
        return question.wait(cancel)
