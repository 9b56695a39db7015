"""One session/prompt turn: a worker thread, StreamEvents turned into session/update lines, exactly one answer."""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from openheim.acp.client_io import AcpClientIo
from openheim.acp.connection import encode
from openheim.acp.convert import text_chunk
from openheim.acp.permission import AcpGate
from openheim.acp.terminal import Terminals
from openheim.acp.toolcalls import ToolCallTracker
from openheim.acp.util import error_for, stop_reason
from openheim.core.models import Message
from openheim.core.turn import CancelToken

if TYPE_CHECKING:
    from openheim.acp.connection import Connection
    from openheim.core.models import ContentBlock, StreamEvent
    from openheim.core.runtime.state import AgentState

log = logging.getLogger(__name__)

CANCEL_GRACE = 0.8  # seconds a cancelled turn gets to wind down before it is answered anyway
FOLLOW_WAIT = 2.0  # seconds a prompt sent right after a cancel waits for the cancelled turn to let go
INTERRUPTED = "Cancelled by user."


class ClientFeatures:
    """What the client offered at initialize."""

    def __init__(self, read: bool = False, write: bool = False, terminal: bool = False) -> None:
        self.read, self.write, self.terminal = read, write, terminal


class PromptRun:
    """Runs state.prompt on its own thread; updates go out before the single prompt answer, never after."""

    def __init__(self, state: AgentState, conn: Connection, request_id: object, session_id: str,
                 blocks: list[ContentBlock], extra_skills: list[str], features: ClientFeatures,
                 on_done=None, after: PromptRun | None = None) -> None:
        self.after = after  # a cancelled turn on the same session that must end first
        self.state, self.conn, self.request_id, self.session_id = state, conn, request_id, session_id
        self.blocks, self.extra_skills = blocks, extra_skills
        self.on_done = on_done
        self.cancelled = False
        self.token = CancelToken()  # the turn's cancel token, held before the turn starts
        self.answered = False
        self._lock = threading.Lock()
        self.session = session = state.session(session_id)
        self.context_window = session.config.context_window
        registry = state.registry
        self.tracker = ToolCallTracker(session.cwd, lambda n: registry.capabilities(n).kind,
                                       lambda n: registry.capabilities(n).read_only, self.update)
        self.client_io = self._client_io(features)
        self.tracker.client_io = self.client_io
        self.tracker.cancel = self.token
        self.gate = AcpGate(conn, session_id, self.tracker, lambda n: registry.capabilities(n).kind)
        self.thread = threading.Thread(target=self._work, name=f"acp-prompt-{session_id[:8]}", daemon=True)

    def _client_io(self, features: ClientFeatures) -> AcpClientIo | None:
        terminals = None
        if features.terminal and "execute_command" in self.state.registry:
            terminals = Terminals(self.conn, self.session_id, self.tracker)
        if not (features.read or features.write or terminals):
            return None
        return AcpClientIo(self.conn, self.session_id, features.read, features.write, terminals)

    def start(self) -> PromptRun:
        self.thread.start()
        return self

    # --- updates ---------------------------------------------------------------

    def update(self, update: dict) -> None:
        """Send one session/update unless the prompt has already been answered."""
        line = encode({"jsonrpc": "2.0", "method": "session/update",
                       "params": {"sessionId": self.session_id, "update": update}})
        with self._lock:
            if not self.answered:
                self.conn.writer.send_line(line)

    def on_event(self, event: StreamEvent) -> None:
        try:
            self._convert(event)
        except Exception:  # a display problem must never end the turn
            log.exception("could not turn a %s event into an ACP update", event.kind)

    def _convert(self, event: StreamEvent) -> None:
        kind, data = event.kind, event.data
        if kind == "llm_response":
            if data.get("content"):
                self.update(text_chunk("agent_message_chunk", data["content"]))
        elif kind == "thinking_content":
            if data.get("content"):
                self.update(text_chunk("agent_thought_chunk", data["content"]))
        elif kind == "tool_call":
            self.tracker.opened(data["id"], data["tool_name"], data["arguments"])
        elif kind == "tool_result":
            self.tracker.closed(data["id"], data["result"], data["is_error"])
        elif kind == "usage" and self.context_window and data.get("usage") is not None:
            usage = data["usage"]
            self.update({"sessionUpdate": "usage_update", "used": usage.prompt_tokens + usage.output_tokens,
                         "size": self.context_window})

    # --- the turn ------------------------------------------------------------------

    def _work(self) -> None:
        if self.after is not None:
            self.after.thread.join(FOLLOW_WAIT)
            self.after = None
        if self.cancelled:
            self.finish("cancelled", None)
            return
        first_turn = not self.state.memory.history.exists(self.session_id)
        try:
            result = self.state.prompt(self.session_id, self.blocks, self.gate, self.client_io, self.on_event,
                                       self.extra_skills, self.token)
        except Exception as e:  # answered as a JSON-RPC error (or cancelled)
            if not self.cancelled:
                log.info("prompt on %s failed: %s", self.session_id, e)
            self.finish(None, e)
            return
        if first_turn:
            self._announce_title()
        self.finish(stop_reason(result.stop_reason), None)

    def _announce_title(self) -> None:
        """session_info_update after the first exchange, so the client's history shows a title."""
        from openheim.memory.history import now_rfc3339, title_from

        title = title_from([Message("user", list(self.blocks))])
        if title:
            self.update({"sessionUpdate": "session_info_update", "title": title, "updatedAt": now_rfc3339()})

    def cancel(self) -> None:
        """session/cancel: stop the turn; answer `cancelled` soon even if something will not let go."""
        self.cancelled = True
        self.token.cancel()
        timer = threading.Timer(CANCEL_GRACE, lambda: self.finish("cancelled", None))
        timer.daemon = True
        timer.start()

    def finish(self, reason: str | None, error: BaseException | None) -> None:
        """Close every open tool call, then answer the prompt exactly once."""
        if self.cancelled:
            reason, error = "cancelled", None
        self.tracker.close_all(INTERRUPTED if self.cancelled else "The turn ended before this tool call finished.")
        with self._lock:
            if self.answered:
                return
            self.answered = True
            if error is not None:
                self.conn.respond_error(self.request_id, error_for(error))
            else:
                self.conn.respond(self.request_id, {"stopReason": reason})
        if self.on_done is not None:
            self.on_done(self)

    def wait(self, timeout: float) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()
