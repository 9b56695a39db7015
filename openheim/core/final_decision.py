"""The last word on a tool call, after every approver (a pre_tool hook, the approval mode, rules, a
remembered "always", the front end's question): ``final_decision``. Every tool call the agent runs passes
it (tests/test_final_decision.py finds the call sites).

It refuses what the approvers refused, what a deny rule names (a hook's "allow" never beats one), and a
write to the project's protected paths (``config.protected``: ``.openheim/**``, ``.git/**``, ``.claude/**``,
``.mcp.json``) that no person approved: such a write is allowed only by a user allow rule naming the path,
or by a person asked afresh right here. No mode, rule allowing every write, remembered answer, hook or
``--approve all`` approves it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from openheim.config.protected import naming_rule, protected_write, refusal
from openheim.config.rules import DENY, RuleSet, decide
from openheim.core.permission import (
    Decision,
    PermissionGate,
    PermissionRequest,
    RulesGate,
    SubagentGate,
    denial_source,
    hides,
    rule_denied_message,
)
from openheim.core.tool_args import parse_arguments

if TYPE_CHECKING:
    from openheim.config.rules import Verdict
    from openheim.core.cancel import CancelToken


@dataclass(frozen=True)
class Refusal:
    """Why a call does not run: what the model reads, and who refused it (for ToolDenied)."""

    message: str
    source: dict[str, str]


class ProtectedWritesGate(PermissionGate):
    """The outermost gate of a session: it knows the session's rules, root and the person who can be asked.
    A write to a protected path skips every approver inside it (``final_decision`` decides it); other calls
    go to ``inner``."""

    def __init__(
        self, inner: PermissionGate, person: PermissionGate | None, user: RuleSet, project: RuleSet, root: str, cwd: str
    ) -> None:
        self.inner, self.user, self.project, self.root, self.cwd = inner, user, project, root, cwd
        self.person = person if person is not None and getattr(person, "asks_a_person", False) else None

    @property
    def gates_read_only(self) -> bool:  # type: ignore[override]
        return self.inner.gates_read_only

    def hides(self, relative: str) -> bool:
        return hides(self.inner, relative)

    def protected(self, req: PermissionRequest) -> str | None:
        """The root-relative path when ``req`` writes a protected path, else None."""
        return protected_write(req.tool_name, parse_arguments(req.arguments), self.root, self.cwd)

    def verdict(self, req: PermissionRequest) -> Verdict:
        return decide(req.tool_name, parse_arguments(req.arguments), self.user, self.project, self.root, self.cwd)

    def request(self, req: PermissionRequest, cancel: CancelToken | None = None) -> Decision:
        if self.protected(req) is not None:
            return Decision.ALLOW_ONCE  # no approver inside decides it: final_decision asks a person
        return self.inner.request(req, cancel)

    def denial_message(self, req: PermissionRequest) -> str:
        return self.inner.denial_message(req)

    def denied_by(self, req: PermissionRequest) -> dict[str, str]:
        return denial_source(self.inner, req)

    def person_decides(self, req: PermissionRequest, cancel: CancelToken | None) -> Refusal | None:
        """A protected write: allowed by a user allow rule naming the path, else by a person asked now."""
        relative = self.protected(req)
        if relative is None or naming_rule(self.user, req.tool_name, relative) is not None:
            return None
        if self.person is None:
            return Refusal(refusal(relative), {"by": "protected"})
        if self.person.request(req, cancel).allowed:
            return None
        return Refusal(self.person.denial_message(req), denial_source(self.person, req))


def _outermost(gate: PermissionGate, req: PermissionRequest) -> tuple[PermissionGate, PermissionRequest]:
    """The gate under any SubagentGate, and the request tagged as the subagent's."""
    while isinstance(gate, SubagentGate):
        req = replace(req, subagent=gate.subagent, parent_tool_call_id=gate.parent_tool_call_id)
        gate = gate.inner
    return gate, req


def _deny_rule(gate: PermissionGate, req: PermissionRequest) -> Refusal | None:
    """What a deny rule says about ``req``, found on the session's outermost or rules gate."""
    if isinstance(gate, (ProtectedWritesGate, RulesGate)):
        verdict = gate.verdict(req)
        if verdict.outcome == DENY and verdict.rule is not None:
            source = {"by": "rule", "rule": str(verdict.rule), "source": verdict.rule.source}
            return Refusal(rule_denied_message(verdict), source)
    return None


def final_decision(
    gate: PermissionGate, req: PermissionRequest, approved: bool, cancel: CancelToken | None
) -> Refusal | None:
    """None when the call may run, else why not. ``approved``: what the approvers before said (a hook's
    allow, no question needed, or the gate's answer)."""
    if not approved:
        return Refusal(gate.denial_message(req), denial_source(gate, req))
    outer, tagged = _outermost(gate, req)
    denied = _deny_rule(outer, tagged)
    if denied is not None:
        return denied
    if isinstance(outer, ProtectedWritesGate):
        return outer.person_decides(tagged, cancel)
    return None
