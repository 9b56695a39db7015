"""PermissionGate: how a front end approves or rejects a tool call before it runs.

Gates here: AllowAll (library default), PolicyGate (``openheim run --approve``), FailClosedGate
(base for interactive front ends), RememberingGate (per-session *Always decisions around any gate),
RulesGate (permission rules from config, flags and the project, in front of them). What runs after all
of them (deny rules and the project's protected paths) is ``core.final_decision``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from openheim.config.rules import ALLOW, DENY, PROJECT_ALLOW, decide, read_denied
from openheim.core.tool_args import parse_arguments

if TYPE_CHECKING:
    from openheim.config.rules import RuleSet, Verdict
    from openheim.core.cancel import CancelToken
    from openheim.core.capabilities import ToolCapabilities

log = logging.getLogger(__name__)

DENIED_BY_USER = "Permission denied by user."
POLICIES = ("all", "reads", "none")


class Decision(str, Enum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"
    REJECT_ALWAYS = "reject_always"

    @property
    def allowed(self) -> bool:
        return self in (Decision.ALLOW_ONCE, Decision.ALLOW_ALWAYS)

    @property
    def remembered(self) -> bool:
        """Only the *Always decisions are kept for the rest of the session."""
        return self in (Decision.ALLOW_ALWAYS, Decision.REJECT_ALWAYS)


@dataclass(frozen=True)
class PermissionRequest:
    """A tool call waiting for permission."""

    tool_call_id: str
    tool_name: str
    arguments: str
    subagent: str | None = None  # the delegated agent asking, when it is not the session's own
    parent_tool_call_id: str | None = None  # the delegate_task call it runs in


class PermissionGate(Protocol):
    """Asked once per side-effect tool call; may block (the agent worker waits).

    Subclass it (or one of the gates here) to inherit the defaults: read-only tools run without
    asking, and a denied call tells the model "Permission denied by user."
    """

    gates_read_only: bool = False  # True: read-only tools are put to the gate too
    # False: a project's allow rules must not let a call past this gate's refusal (``--approve none``)
    project_allows_apply: bool = True
    # True: ``request`` puts the call to a person (so it may approve writing the project's configuration)
    asks_a_person: bool = False

    def request(self, req: PermissionRequest, cancel: CancelToken | None = None) -> Decision: ...

    def denial_message(self, req: PermissionRequest) -> str:
        """The tool result the model reads when this gate refused a call."""
        return DENIED_BY_USER

    def denied_by(self, req: PermissionRequest) -> dict[str, str]:
        """Who refused a call, for scripts: ``{"by": "user"}``, ``{"by": "approve", "mode": ...}`` or
        ``{"by": "rule", "rule": ..., "source": ...}``."""
        return {"by": "user"}

    def hides(self, relative: str) -> bool:
        """Whether a deny rule forbids reading this root-relative path: tools that return file content
        other than read_file (search) leave such files out."""
        return False


CapabilitiesLookup = Callable[[str], "ToolCapabilities"]


def _sorted_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_json(v) for v in value]
    return value


def approval_key(tool_name: str, arguments: str, scope: str = "tool_name") -> str:
    """What an *Always decision covers: the tool, or (exact_arguments scope) these exact arguments."""
    if scope != "exact_arguments":
        return tool_name

    value = parse_arguments(arguments)
    if value is None:
        return f"{tool_name}:unparsed:{arguments}"
    compact = json.dumps(_sorted_json(value), separators=(",", ":"), ensure_ascii=False)
    return f"{tool_name}:{compact}"


def policy_denied_message(policy: str) -> str:
    """The tool result the model reads when ``openheim run --approve {policy}`` refused a call."""
    if policy == "none":
        return "Permission denied by policy (--approve none): no tool may run in this session."
    return "Permission denied by policy (--approve reads): this tool is not read-only."


def check_gate(gate: object) -> PermissionGate:
    """``gate`` if it has every PermissionGate member, else a TypeError naming what is missing."""
    missing = [m for m in ("request", "gates_read_only", "denial_message") if not hasattr(gate, m)]
    if missing:
        raise TypeError(
            f"{type(gate).__name__} is not a PermissionGate: it lacks {', '.join(missing)}; "
            "subclass openheim.PermissionGate"
        )
    return gate  # type: ignore[return-value]


def hides(gate: object, relative: str) -> bool:
    """``gate.hides(relative)`` for any gate (one that predates the method hides nothing)."""
    method = getattr(gate, "hides", None)
    return bool(method(relative)) if callable(method) else False


def needs_permission(gate: PermissionGate, capabilities: ToolCapabilities) -> bool:
    """Whether the loop must ask ``gate`` before running a tool with these capabilities."""
    return not capabilities.read_only or gate.gates_read_only


class AllowAll(PermissionGate):
    """The library default: every call runs."""

    def request(self, req: PermissionRequest, cancel: CancelToken | None = None) -> Decision:
        return Decision.ALLOW_ONCE


class PolicyGate(PermissionGate):
    """``openheim run --approve all|reads|none``: decides without asking anyone."""

    def __init__(self, policy: str, capabilities: CapabilitiesLookup) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown approval policy '{policy}'; use one of: {', '.join(POLICIES)}")
        self.policy = policy
        self._capabilities = capabilities
        self.project_allows_apply = policy != "none"

    @property
    def gates_read_only(self) -> bool:  # type: ignore[override]
        """With ``none`` even read-only tools must be put to the gate."""
        return self.policy == "none"

    def request(self, req: PermissionRequest, cancel: CancelToken | None = None) -> Decision:
        if self.policy == "all":
            return Decision.ALLOW_ONCE
        if self.policy == "reads" and self._capabilities(req.tool_name).read_only:
            return Decision.ALLOW_ONCE
        return Decision.REJECT_ONCE

    def denial_message(self, req: PermissionRequest) -> str:
        return policy_denied_message(self.policy)

    def denied_by(self, req: PermissionRequest) -> dict[str, str]:
        return {"by": "approve", "mode": self.policy}


class FailClosedGate(PermissionGate):
    """Base for interactive gates: any failure, missing answer or cancellation rejects the call."""

    asks_a_person = True

    def ask(self, req: PermissionRequest, cancel: CancelToken | None) -> Decision | None:
        """Ask the user; None means no answer (UI gone, request dropped)."""
        return None

    def request(self, req: PermissionRequest, cancel: CancelToken | None = None) -> Decision:
        if cancel is not None and cancel.cancelled:
            return Decision.REJECT_ONCE
        try:
            answer = self.ask(req, cancel)
        except Exception:  # a broken front end must never let a call through
            log.exception("permission prompt failed; rejecting %s", req.tool_name)
            return Decision.REJECT_ONCE
        return answer if isinstance(answer, Decision) else Decision.REJECT_ONCE


class Question:
    """One permission question put to a person; answered once, from any thread (later answers are ignored)."""

    def __init__(self, request: PermissionRequest) -> None:
        self.request = request
        self._done = threading.Event()
        self._decision: Decision | None = None
        self._lock = threading.Lock()

    def answer(self, decision: Decision) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._decision = decision
            self._done.set()

    @property
    def answered(self) -> bool:
        return self._done.is_set()

    def wait(self, cancel: CancelToken | None) -> Decision | None:
        """The answer; None when the turn is cancelled first (the caller rejects)."""
        remove = cancel.on_cancel(lambda: self.answer(Decision.REJECT_ONCE)) if cancel is not None else None
        try:
            self._done.wait()
        finally:
            if remove is not None:
                remove()
        if cancel is not None and cancel.cancelled:
            return None
        return self._decision

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of a PermissionAsked event (the request, not the answer channel)."""
        r = self.request
        return {
            "tool_call_id": r.tool_call_id,
            "tool_name": r.tool_name,
            "arguments": r.arguments,
            "subagent": r.subagent,
            "parent_tool_call_id": r.parent_tool_call_id,
        }


class RememberingGate(PermissionGate):
    """Wraps a gate with the session's remembered *Always decisions (shared with subagents)."""

    def __init__(
        self,
        inner: PermissionGate,
        approvals: dict[str, Decision] | None = None,
        capabilities: CapabilitiesLookup | None = None,
    ) -> None:
        self.inner = inner
        self.approvals = approvals if approvals is not None else {}
        self._capabilities = capabilities
        self._lock = threading.Lock()

    @property
    def gates_read_only(self) -> bool:  # type: ignore[override]
        return self.inner.gates_read_only

    def denial_message(self, req: PermissionRequest) -> str:
        return self.inner.denial_message(req)

    def denied_by(self, req: PermissionRequest) -> dict[str, str]:
        return denial_source(self.inner, req)

    def hides(self, relative: str) -> bool:
        return hides(self.inner, relative)

    def key(self, req: PermissionRequest) -> str:
        scope = self._capabilities(req.tool_name).approval_scope if self._capabilities else "tool_name"
        return approval_key(req.tool_name, req.arguments, scope)

    def request(self, req: PermissionRequest, cancel: CancelToken | None = None) -> Decision:
        key = self.key(req)
        with self._lock:
            stored = self.approvals.get(key)
        if stored is not None:
            return stored
        decision = self.inner.request(req, cancel)
        if decision.remembered:
            with self._lock:
                self.approvals[key] = decision
        return decision


class SubagentGate(PermissionGate):
    """A subagent's view of its parent's gate: every request is tagged with the subagent's name."""

    def __init__(self, inner: PermissionGate, subagent: str, parent_tool_call_id: str | None) -> None:
        self.inner, self.subagent, self.parent_tool_call_id = inner, subagent, parent_tool_call_id

    @property
    def gates_read_only(self) -> bool:  # type: ignore[override]
        return self.inner.gates_read_only

    def denial_message(self, req: PermissionRequest) -> str:
        return self.inner.denial_message(req)

    def denied_by(self, req: PermissionRequest) -> dict[str, str]:
        return denial_source(self.inner, req)

    def hides(self, relative: str) -> bool:
        return hides(self.inner, relative)

    def request(self, req: PermissionRequest, cancel: CancelToken | None = None) -> Decision:
        from dataclasses import replace

        return self.inner.request(
            replace(req, subagent=self.subagent, parent_tool_call_id=self.parent_tool_call_id), cancel
        )


def rule_denied_message(verdict: Verdict) -> str:
    """The tool result the model reads when a deny rule refused a call."""
    return f"Permission denied by rule: {verdict.reason}."


class RulesGate(PermissionGate):
    """Permission rules in front of a fallback gate: a deny rule refuses, the user's allow rules allow,
    the project's allow rules allow unless the fallback refuses everything (``--approve none``), and the
    rest goes to ``inner`` (read-only calls only when ``inner`` gates them)."""

    def __init__(
        self,
        inner: PermissionGate,
        user: RuleSet,
        project: RuleSet,
        root: str | None,
        cwd: str | None,
        capabilities: CapabilitiesLookup,
        project_allows: bool = True,
    ) -> None:
        self.inner, self.user, self.project = inner, user, project
        self.root, self.cwd = root, cwd
        self._capabilities = capabilities
        self._project_allows = project_allows

    @property
    def gates_read_only(self) -> bool:  # type: ignore[override]
        """Deny rules can refuse read-only tools too, so with any, every call comes here."""
        return bool(self.user.deny or self.project.deny) or self.inner.gates_read_only

    def verdict(self, req: PermissionRequest) -> Verdict:
        return decide(req.tool_name, parse_arguments(req.arguments), self.user, self.project, self.root, self.cwd)

    def request(self, req: PermissionRequest, cancel: CancelToken | None = None) -> Decision:
        verdict = self.verdict(req)
        if verdict.outcome == DENY:
            return Decision.REJECT_ONCE
        if verdict.outcome == ALLOW or (verdict.outcome == PROJECT_ALLOW and self._project_allows):
            return Decision.ALLOW_ONCE
        if not self.inner.gates_read_only and self._capabilities(req.tool_name).read_only:
            return Decision.ALLOW_ONCE
        return self.inner.request(req, cancel)

    def hides(self, relative: str) -> bool:
        return read_denied(self.user + self.project, relative) is not None or hides(self.inner, relative)

    def denial_message(self, req: PermissionRequest) -> str:
        verdict = self.verdict(req)
        return rule_denied_message(verdict) if verdict.outcome == DENY else self.inner.denial_message(req)

    def denied_by(self, req: PermissionRequest) -> dict[str, str]:
        verdict = self.verdict(req)
        if verdict.outcome == DENY and verdict.rule is not None:
            return {"by": "rule", "rule": str(verdict.rule), "source": verdict.rule.source}
        return denial_source(self.inner, req)


def denial_source(gate: object, req: PermissionRequest) -> dict[str, str]:
    """``gate.denied_by(req)``, for gates written before it existed too (they are the user's)."""
    method = getattr(gate, "denied_by", None)
    try:
        found = method(req) if callable(method) else None
    except Exception:  # a description must never break a turn
        log.exception("could not tell who denied %s", req.tool_name)
        found = None
    return found if isinstance(found, dict) else {"by": "user"}
