"""The built-in slash commands of an ACP session: ``/compact`` and ``/undo [N] [force]``, answered without a turn,
and the session update that shows a compaction."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openheim.acp.convert import text_chunk
from openheim.acp.util import error_for
from openheim.core.events import Compaction

if TYPE_CHECKING:
    from openheim.acp.connection import Connection
    from openheim.core.events import Compaction
    from openheim.runtime.session import Session

log = logging.getLogger(__name__)

COMMANDS: list[dict[str, Any]] = [
    {
        "name": "compact",
        "description": "Summarise the conversation now; the next turns start from the summary "
        "(the full record stays in the session log)",
    },
    {
        "name": "undo",
        "description": "Restore the files the last turn changed (a number: that many turns; "
        "'force': also overwrite files changed since)",
        "input": {"hint": "[turns] [force]"},
    },
]
NAMES = frozenset(c["name"] for c in COMMANDS)


def compaction_update(event: Compaction) -> dict:
    """A compaction as a thought chunk the client shows, with the details under ``_meta``."""
    if event.error is not None:
        text = f"[the conversation was not compacted: {event.error}]\n"
    else:
        text = (
            f"[conversation compacted: {event.keep_from} earlier messages summarised; the full record stays in "
            f"the session log]\n"
        )
    update = text_chunk("agent_thought_chunk", text)
    update["_meta"] = {
        "openheim/compaction": {
            "keepFrom": event.keep_from,
            "model": event.model,
            "error": event.error,
            "manual": event.manual,
        }
    }
    return update


def parse(text: str) -> tuple[str, str] | None:
    """(command, arguments) when ``text`` is one of these commands."""
    if not text.startswith("/"):
        return None
    name, _, rest = text[1:].partition(" ")
    return (name, rest.strip()) if name in NAMES else None


def run(conn: Connection, request_id: Any, session: Session, name: str, arg: str, send: Callable[[dict], None]) -> None:
    """Answer the session/prompt request on a thread of its own (``/compact`` asks the model)."""

    def work() -> None:
        try:
            text = _compact(session, send) if name == "compact" else _undo(session, arg)
        except Exception as e:
            conn.respond_error(request_id, error_for(e))
            return
        send(text_chunk("agent_message_chunk", text))
        conn.respond(request_id, {"stopReason": "end_turn"})

    threading.Thread(target=work, name=f"acp-/{name}", daemon=True).start()


def _compact(session: Session, send: Callable[[dict], None]) -> str:

    outcome = session.compact(lambda e: send(compaction_update(e)) if isinstance(e, Compaction) else None)
    if outcome.record is None:
        return f"Not compacted: {outcome.error}."
    return f"Compacted: {outcome.record.keep_from} earlier messages are now a summary."


def _undo(session: Session, arg: str) -> str:
    words = arg.lower().split()
    turns = next((int(w) for w in words if w.isdigit()), 1)
    plan = session.plan_undo(turns)
    result = session.undo(turns, force="force" in words)
    lines = [f"Undid turn {', '.join(str(t) for t in result.turns)}:", *plan.diffstat()]
    lines.extend(result.summary())
    return "\n".join(lines)
