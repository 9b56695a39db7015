"""The prompts of a session's MCP servers as ACP slash commands: ``/server.name name=value ...`` is expanded
(prompts/get) into the turn's prompt before it reaches the model."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from openheim.acp.convert import text_chunk
from openheim.acp.util import error_for
from openheim.core.models import TextBlock
from openheim.errors import OpenheimError

if TYPE_CHECKING:
    from openheim.acp.connection import Connection
    from openheim.core.models import ContentBlock
    from openheim.runtime.session import Session

log = logging.getLogger(__name__)


def commands(session: Session, wait: float = 0.0) -> list[dict[str, Any]]:
    """One available command per prompt: its name ``server.name``, its description, its arguments as the hint."""
    try:
        prompts = session.mcp_prompts(wait)
    except Exception as e:  # a closed session or a server in trouble must not break the announcement
        log.info("could not list the MCP prompts of %s: %s", session.id, e)
        return []
    found = []
    for prompt in prompts:
        command: dict[str, Any] = {
            "name": prompt.command,
            "description": prompt.description or f"MCP prompt {prompt.ref}",
        }
        if prompt.arguments:
            command["input"] = {"hint": prompt.usage()}
        found.append(command)
    return found


def parse(session: Session, blocks: list[ContentBlock]) -> tuple[str, str] | None:
    """(command, arguments) when the prompt's first block is ``/server.name ...`` naming one of the session's
    MCP prompts."""
    first = blocks[0] if blocks else None
    if not isinstance(first, TextBlock) or not first.text.startswith("/"):
        return None
    match = re.match(r"/(\S+)\s*(.*)\Z", first.text, re.S)
    if match is None:
        return None
    name, rest = match.group(1), match.group(2)
    if "." not in name:  # every prompt's command has one; skills and built-in commands have none
        return None
    try:
        known = {p.command for p in session.mcp_prompts()}
    except Exception:
        return None
    return (name, rest.strip()) if name in known else None


class Expansion:
    """One ``/server.name args`` prompt being fetched (a request to the server, on a thread of its own) before
    its turn starts. The prompt request is answered exactly once: by a failure (one line, then ``end_turn``),
    by a cancel (``cancelled`` at once; the fetched text is dropped), or by the turn ``start`` runs."""

    def __init__(
        self,
        conn: Connection,
        request_id: Any,
        session: Session,
        blocks: list[ContentBlock],
        name: str,
        arguments: str,
    ) -> None:
        self.conn, self.request_id, self.session = conn, request_id, session
        self.blocks, self.name, self.arguments = blocks, name, arguments
        self._lock = threading.Lock()
        self.settled = False  # answered, or handed to the turn

    def start(self, run_turn: Callable[[list[ContentBlock]], None], done: Callable[[], None]) -> None:
        """Fetch on a thread; then ``run_turn(blocks)`` (which answers the request) unless cancelled; ``done``
        when the fetch is over either way."""

        def work() -> None:
            try:
                self._fetch_then(run_turn)
            finally:
                done()

        threading.Thread(target=work, name=f"acp-/{self.name}", daemon=True).start()

    def cancel(self) -> None:
        self._settle(lambda: self.conn.respond(self.request_id, {"stopReason": "cancelled"}))

    def _fetch_then(self, run_turn: Callable[[list[ContentBlock]], None]) -> None:

        try:
            text = self.session.expand_mcp_prompt(self.name, self.arguments)
        except OpenheimError as e:
            self._settle(partial(self._tell, f"/{self.name}: {e}"))
            return
        except Exception as e:
            log.exception("MCP prompt /%s failed", self.name)
            self._settle(partial(self.conn.respond_error, self.request_id, error_for(e)))
            return
        blocks = [TextBlock(text), *self.blocks[1:]]

        def turn() -> None:
            try:
                run_turn(blocks)
            except Exception as e:  # SessionBusy: a turn started meanwhile
                self.conn.respond_error(self.request_id, error_for(e))

        self._settle(turn)

    def _tell(self, line: str) -> None:
        self.conn.notify(
            "session/update", {"sessionId": self.session.id, "update": text_chunk("agent_message_chunk", line + "\n")}
        )
        self.conn.respond(self.request_id, {"stopReason": "end_turn"})

    def _settle(self, answer: Callable[[], None]) -> None:
        with self._lock:
            if self.settled:
                return
            self.settled = True
        answer()
