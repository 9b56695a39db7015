"""The ACP permission gate: asks the client with session/request_permission and waits for the answer."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from openheim.acp.toolcalls import subagent_call_id, tool_call_object
from openheim.acp.util import RpcError
from openheim.core.permission import Decision, PermissionRequest, Question
from openheim.core.tools import ToolView, parse_arguments
from openheim.errors import Cancelled, OpenheimError

if TYPE_CHECKING:
    from openheim.acp.connection import Connection
    from openheim.acp.toolcalls import ToolCallTracker
    from openheim.core.turn_context import CancelToken
    from openheim.runtime.session import Session

log = logging.getLogger(__name__)

OPTIONS = [
    {"optionId": "allow_once", "name": "Allow Once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Allow Always", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject Once", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Reject Always", "kind": "reject_always"},
]
_DECISIONS = {d.value: d for d in Decision}


def options_for(rules: list[str]) -> list[dict]:
    """The permission options; "Allow Always" names the rules it saves for the project, when there are any."""
    if not rules:
        return OPTIONS
    always = {**OPTIONS[1], "name": f"Allow Always (saves {', '.join(rules)} for this project)"}
    return [OPTIONS[0], always, *OPTIONS[2:]]


class ProjectRules:
    """What "allow always" saves: the exact rules for a call, appended to the project's settings file."""

    def __init__(self, handle: Session) -> None:
        self.handle = handle

    def suggest(self, req: PermissionRequest) -> list[str]:
        try:
            return self.handle.suggested_rules(req.tool_name, req.arguments)
        except Exception:  # never let a suggestion stop the question being asked
            log.warning("no project rule can be suggested for %s", req.tool_name, exc_info=True)
            return []

    def save(self, rules: list[str]) -> None:
        """Append the rules; a file that cannot be written is logged, and the answer still counts this session."""
        try:
            path = self.handle.save_project_rules(rules)
            log.info("saved %s in %s", ", ".join(rules), path)
        except (OpenheimError, OSError, ValueError) as e:
            log.warning("could not save %s for the project: %s", ", ".join(rules), e)


def decision_from(result: object) -> Decision:
    """The client's answer as a Decision; anything but a known selected option is a rejection."""
    outcome = result.get("outcome") if isinstance(result, dict) else None
    if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
        return Decision.REJECT_ONCE
    return _DECISIONS.get(str(outcome.get("optionId")), Decision.REJECT_ONCE)


class AcpQuestions:
    """Answers a turn's permission questions (PermissionAsked events) by asking the client with
    session/request_permission, each on a short-lived thread so the turn's other updates keep flowing.
    The turn's gate (AskTheFrontEnd) rejects whatever is not answered with a Decision."""

    def __init__(
        self, conn: Connection, session_id: str, tracker: ToolCallTracker, project_rules: ProjectRules | None = None
    ) -> None:
        self.conn, self.session_id, self.tracker = conn, session_id, tracker
        self.project_rules = project_rules

    def answer(self, question: Question, cancel: CancelToken | None) -> None:
        """Put ``question`` to the client in the background; its answer (or a rejection) answers it."""

        def work() -> None:
            decision = None
            try:
                decision = self.ask(question.request, cancel)
            except Exception:  # a broken exchange must never let a call through
                log.exception("permission request for %s failed; rejecting", question.request.tool_name)
            question.answer(decision if isinstance(decision, Decision) else Decision.REJECT_ONCE)

        threading.Thread(target=work, name=f"acp-permission-{self.session_id[:8]}", daemon=True).start()

    def ask(self, req: PermissionRequest, cancel: CancelToken | None) -> Decision | None:
        rules = self.project_rules.suggest(req) if self.project_rules is not None else []
        params = {"sessionId": self.session_id, "toolCall": self._tool_call(req), "options": options_for(rules)}
        try:
            result = self.conn.request("session/request_permission", params, cancel)
        except Cancelled:
            return None
        except (RpcError, TimeoutError) as e:  # -32800, a client error, a closed connection
            log.info("permission request for %s failed (%s); rejecting", req.tool_name, e)
            return None
        if cancel is not None and cancel.cancelled:
            return None
        decision = decision_from(result)
        if decision == Decision.ALLOW_ALWAYS and rules and self.project_rules is not None:
            self.project_rules.save(rules)
        if decision.allowed:
            self.tracker.start(self._call_id(req))
        return decision

    @staticmethod
    def _call_id(req: PermissionRequest) -> str:
        if req.subagent is None:
            return req.tool_call_id
        return subagent_call_id(req.subagent, req.parent_tool_call_id or "", req.tool_call_id)

    def _tool_call(self, req: PermissionRequest) -> dict:
        call_id = self._call_id(req)
        view = self.tracker.permission_view(call_id)
        if view is not None:
            return view
        args = parse_arguments(req.arguments)
        shown = self.tracker.present(req.tool_name, args) if self.tracker.present else ToolView(req.tool_name)
        if req.subagent is not None:
            shown = replace(shown, title=f"{shown.title} (subagent {req.subagent})")
        view = tool_call_object(call_id, replace(shown, locations=()), None, "pending")
        view.pop("locations")
        view["rawInput"] = args if args is not None else {"arguments": req.arguments}
        if args is None:
            view["content"] = [{"type": "content", "content": {"type": "text", "text": json.dumps(req.arguments)}}]
        return view
