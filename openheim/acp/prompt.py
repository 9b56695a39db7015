"""One session/prompt: the session's Turn, its StreamEvents turned into session/update lines, one answer."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from openheim.acp.client_io import AcpClientIo
from openheim.acp.connection import encode
from openheim.acp.permission import AcpQuestions, ProjectRules
from openheim.acp.terminal import Terminals
from openheim.acp.updates import AcpUpdates
from openheim.acp.util import error_for, stop_reason
from openheim.conversation.history import now_rfc3339, title_from
from openheim.core.asking import AskTheFrontEnd
from openheim.core.events import PermissionAsked
from openheim.core.models import Message

if TYPE_CHECKING:
    from openheim.acp.connection import Connection
    from openheim.core.models import ContentBlock
    from openheim.runtime.session import Session
    from openheim.runtime.turn import Turn

log = logging.getLogger(__name__)

INTERRUPTED = "Cancelled by user."


class ClientFeatures:
    """What the client offered at initialize."""

    def __init__(self, read: bool = False, write: bool = False, terminal: bool = False) -> None:
        self.read, self.write, self.terminal = read, write, terminal


class PromptRun:
    """One session/prompt: the session's Turn, its events sent as session/update lines by a pump thread,
    and exactly one answer, after every update."""

    def __init__(
        self,
        handle: Session,
        conn: Connection,
        request_id: object,
        blocks: list[ContentBlock],
        extra_skills: list[str],
        features: ClientFeatures,
        on_done: Callable[[PromptRun], None] | None = None,
    ) -> None:
        self.handle, self.conn, self.request_id = handle, conn, request_id
        self.session_id = handle.id
        self.blocks, self.extra_skills = blocks, extra_skills
        self.on_done = on_done
        self.answered = False
        self._answered = threading.Event()
        self._lock = threading.Lock()
        self.updates = AcpUpdates(self.update, context_window=handle.config.context_window)
        self.tracker = self.updates.tracker
        self.client_io = self._client_io(features)
        self.gate = AskTheFrontEnd()  # each question arrives as a PermissionAsked event; self.questions answers
        self.questions = AcpQuestions(conn, self.session_id, self.tracker, ProjectRules(handle))
        self.turn: Turn | None = None
        self.first_turn = not handle.has_history
        self.thread = threading.Thread(target=self._pump, name=f"acp-prompt-{self.session_id[:8]}", daemon=True)

    def _client_io(self, features: ClientFeatures) -> AcpClientIo | None:
        terminals = Terminals(self.conn, self.session_id, self.tracker) if features.terminal else None
        if not (features.read or features.write or terminals):
            return None
        return AcpClientIo(self.conn, self.session_id, features.read, features.write, terminals)

    def start(self) -> PromptRun:
        """Start the turn (SessionBusy when one runs that was not cancelled), then pump its events."""
        self.turn = self.handle.start_turn(
            self.blocks, extra_skills=self.extra_skills, gate=self.gate, client_io=self.client_io
        )
        self.tracker.present = self.turn.present
        self.thread.start()
        return self

    @property
    def cancelled(self) -> bool:
        return self.turn is not None and self.turn.cancelled

    # --- updates ---------------------------------------------------------------

    def update(self, update: dict) -> None:
        """Send one session/update unless the prompt has already been answered."""
        line = encode(
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": self.session_id, "update": update}}
        )
        with self._lock:
            if not self.answered:
                self.conn.writer.send_line(line)

    # --- the turn ------------------------------------------------------------------

    def _pump(self) -> None:
        turn = self.turn
        assert turn is not None
        for batch in turn.batches():
            for event in batch:
                if isinstance(event, PermissionAsked):
                    self.questions.answer(event.question, turn.token)
                else:
                    self.updates(event)
        if turn.cancelled:
            self.finish("cancelled", None)
            return
        if turn.error is not None:
            log.info("prompt on %s failed: %s", self.session_id, turn.error)
            self.finish(None, turn.error)
            return
        if self.first_turn:
            self._announce_title()
        self.finish(stop_reason(turn.result.stop_reason), None, turn.result.usage.to_dict())

    def _announce_title(self) -> None:
        """session_info_update after the first exchange, so the client's history shows a title."""

        title = title_from([Message("user", list(self.blocks))])
        if title:
            self.update({"sessionUpdate": "session_info_update", "title": title, "updatedAt": now_rfc3339()})

    def cancel(self) -> None:
        """session/cancel: the turn's outcome is "cancelled" soon even if something will not let go."""
        if self.turn is not None:
            self.turn.cancel()

    def finish(self, reason: str | None, error: BaseException | None, usage: dict | None = None) -> None:
        """Close every open tool call, then answer the prompt exactly once (with the turn's token usage,
        its subagents' included, in ``_meta.openheim.usage``)."""
        self.updates.close(INTERRUPTED if self.cancelled else "The turn ended before this tool call finished.")
        with self._lock:
            if self.answered:
                return
            self.answered = True
            if error is not None:
                self.conn.respond_error(self.request_id, error_for(error))
            else:
                answer: dict = {"stopReason": reason}
                if usage is not None:
                    answer["_meta"] = {"openheim": {"usage": usage}}
                self.conn.respond(self.request_id, answer)
            self._answered.set()
        if self.on_done is not None:
            self.on_done(self)

    def wait_answered(self, timeout: float) -> bool:
        """Wait until the prompt has been answered; False if ``timeout`` passed first."""
        return self._answered.wait(timeout)

    def wait(self, timeout: float) -> bool:
        """Wait for the turn's worker to end (after a cancel, on shutdown)."""
        return self.turn is None or self.turn.join(timeout)
