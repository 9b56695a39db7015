"""The turn's history writer: each finished message reaches the log as it happens."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from openheim.conversation.log_events import CompactionRecord
from openheim.core.events import Compaction, MessageAppended, StreamEvent
from openheim.errors import FileAccessError, OpenheimError, file_error

if TYPE_CHECKING:
    from openheim.conversation.history import Conversation, HistoryManager
    from openheim.core.models import Message

log = logging.getLogger(__name__)

OnEvent = Callable[[StreamEvent], None]


class TurnRecorder:
    """Appends each finished message to the log as it happens; falls back to a full save on failure."""

    def __init__(self, history: HistoryManager, conv: Conversation, on_event: OnEvent) -> None:
        self.history, self.conv, self.on_event = history, conv, on_event
        self.failed = False
        # the log as it was before the turn, to go back to when the turn cannot be saved (a full disk)
        self.before = (
            (conv.persisted, conv.log_size, conv.log_needs_newline) if conv.persisted == len(conv.messages) else None
        )

    def record(self, message: Message) -> None:
        """The user's message: on disk before the model is asked (rewriting the log if the append fails),
        or the turn fails here, before any request is sent."""
        self.conv.messages.append(message)
        self._write(message)
        if not self.failed:
            return
        try:
            self.history.save_conversation(self.conv)
        except (OSError, OpenheimError):
            self.conv.messages.pop()
            raise
        self.failed = False

    def __call__(self, event: StreamEvent) -> None:
        if isinstance(event, MessageAppended):
            self._write(event.message)
        elif isinstance(event, Compaction) and event.error is None:
            self._write_compaction(event)
        self.on_event(event)

    def _write_compaction(self, event: Compaction) -> None:

        record = CompactionRecord(event.at, event.keep_from, event.summary, event.model, event.usage, event.manual)
        if self.failed:
            self.conv.compactions.append(record)  # the rewrite at the end writes it
            return
        try:
            self.history.append_compaction(self.conv, record)
        except (OSError, OpenheimError) as e:
            log.info(
                "could not append to the history of %s (%s); it will be rewritten at the end", self.conv.meta.id, e
            )
            self.conv.compactions.append(record)
            self.failed = True

    def _write(self, message: Message) -> None:
        if self.failed:
            return
        try:
            self.history.append_message(self.conv, message)
        except (OSError, OpenheimError) as e:
            log.info(
                "could not append to the history of %s (%s); it will be rewritten at the end", self.conv.meta.id, e
            )
            self.failed = True

    def close(self) -> None:
        try:
            if self.failed:
                self.history.save_conversation(self.conv)
                self.failed = False
            else:
                self.history.save_meta(self.conv)
        except (OSError, FileAccessError) as e:  # not HistoryDiverged: lines someone else wrote stay
            if self.failed:
                self._roll_back()
            if isinstance(e, FileAccessError):
                raise
            raise file_error(e, "save conversation", self.history.log_path(self.conv.id)) from None

    def _roll_back(self) -> None:
        """The turn could not be saved: take its lines out of the log again (best effort), so the log holds
        no unanswered prompt and the next turn does not follow one."""
        if self.before is None:
            return
        try:
            self.history.roll_back(self.conv, *self.before)
        except (OSError, OpenheimError) as e:
            log.warning("could not take the unsaved turn out of %s: %s", self.history.log_path(self.conv.id), e)
