"""StreamEvents: what happens during a turn, one frozen dataclass per kind.

Events compare by identity (``eq=False``): nothing compares them.

Every front end renders these in its own medium; ``to_dict`` is their JSON shape
(``{"event_type": kind, ...fields}``, nested objects as dicts).
"""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, get_args

from openheim.core.models import Message, Usage

if TYPE_CHECKING:
    from openheim.core.permission import Question
    from openheim.core.tool_view import ToolView


class _Event:
    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every event is a dataclass
    kind: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event_type": self.kind}
        for f in fields(self):
            if f.metadata.get("json") is False:
                continue
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if hasattr(value, "to_dict") else value
        return out


@dataclass(frozen=True, eq=False, slots=True)
class IterationStart(_Event):
    """A model call of the turn is about to start (counted from 1)."""

    kind: ClassVar[str] = "iteration_start"
    iteration: int


@dataclass(frozen=True, eq=False, slots=True)
class ToolCall(_Event):
    """A tool call about to run; ``view`` is how the tool presents it, taken before it ran."""

    kind: ClassVar[str] = "tool_call"
    id: str
    tool_name: str
    arguments: str
    view: ToolView | None = field(default=None, compare=False, metadata={"json": False})


@dataclass(frozen=True, eq=False, slots=True)
class ToolResult(_Event):
    """What a tool call returned (or its error)."""

    kind: ClassVar[str] = "tool_result"
    id: str
    tool_name: str
    result: str
    is_error: bool


@dataclass(frozen=True, eq=False, slots=True)
class LlmResponse(_Event):
    """A streamed fragment of the reply's text."""

    kind: ClassVar[str] = "llm_response"
    content: str


@dataclass(frozen=True, eq=False, slots=True)
class ThinkingContent(_Event):
    """A streamed fragment of the model's visible thinking."""

    kind: ClassVar[str] = "thinking_content"
    content: str


@dataclass(frozen=True, eq=False, slots=True)
class UsageReport(_Event):
    """The token usage of one model call."""

    kind: ClassVar[str] = "usage"
    usage: Usage
    cost: float | None = None  # US dollars of this call (None: the model has no price)
    total_cost: float | None = None  # US dollars the session has spent so far, subagents included

    def to_dict(self) -> dict[str, Any]:
        """Without the cost keys when the model has no price (the shape stays as it was)."""
        out: dict[str, Any] = {"event_type": self.kind, "usage": self.usage.to_dict()}
        if self.cost is not None:
            out["cost"] = round(self.cost, 6)
        if self.total_cost is not None:
            out["total_cost"] = round(self.total_cost, 6)
        return out


@dataclass(frozen=True, eq=False, slots=True)
class ContextTrimmed(_Event):
    """``dropped`` earlier messages were left out of the request to fit the context window."""

    kind: ClassVar[str] = "context_trimmed"
    dropped: int


@dataclass(frozen=True, eq=False, slots=True)
class Finished(_Event):
    """The turn ended; ``final_response`` is the reply's text, if any."""

    kind: ClassVar[str] = "finished"
    final_response: str | None
    iterations: int


@dataclass(frozen=True, eq=False, slots=True)
class MessageAppended(_Event):
    """A finished message joined the conversation (and is on disk)."""

    kind: ClassVar[str] = "message_appended"
    message: Message


@dataclass(frozen=True, eq=False, slots=True)
class SubagentEvent(_Event):
    """Something a subagent did (its tool calls and results), inside the parent's ``delegate_task`` call."""

    kind: ClassVar[str] = "subagent"
    subagent: str
    parent_tool_call_id: str
    event: ToolCall | ToolResult | UsageReport  # a UsageReport: tokens the subagent used (part of the turn's)


@dataclass(frozen=True, eq=False, slots=True)
class Compaction(_Event):
    """The conversation so far was summarised: the model now sees ``summary`` in place of the messages before
    ``keep_from`` (``usage`` is the summary call's); with ``error`` set, it could not be and fitting takes over."""

    kind: ClassVar[str] = "compaction"
    at: int
    keep_from: int
    summary: str
    model: str | None = None
    usage: Usage | None = None
    manual: bool = False
    error: str | None = None


@dataclass(frozen=True, eq=False, slots=True)
class PermissionAsked(_Event):
    """A tool call waits for a person: the front end shows ``question`` and calls ``question.answer(decision)``
    (from any thread). Unanswered, the call is rejected when the turn is cancelled."""

    kind: ClassVar[str] = "permission_asked"
    question: Question


@dataclass(frozen=True, eq=False, slots=True)
class ToolDenied(_Event):
    """A tool call the permission gate refused: ``by`` user, approve (``mode``: reads or none) or rule
    (``rule``: as written); ``reason`` is what the model was told. Its ToolResult (an error) follows."""

    kind: ClassVar[str] = "tool_denied"
    id: str
    tool_name: str
    by: str
    reason: str
    rule: str | None = None
    mode: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event_type": self.kind, "id": self.id, "tool_name": self.tool_name, "by": self.by}
        if self.rule is not None:
            out["rule"] = self.rule
        if self.mode is not None:
            out["mode"] = self.mode
        out["reason"] = self.reason
        return out


@dataclass(frozen=True, eq=False, slots=True)
class PlanUpdate(_Event):
    """The model's plan, whole (update_plan): each step's text and status (pending, in_progress, completed)."""

    kind: ClassVar[str] = "plan"
    entries: tuple[dict[str, str], ...]
    explanation: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"event_type": self.kind, "entries": [dict(e) for e in self.entries], "explanation": self.explanation}


@dataclass(frozen=True, eq=False, slots=True)
class Notice(_Event):
    """A one-line notice about the turn's surroundings, not from the model (e.g. ``starting MCP servers: time``):
    ``level`` is ``info`` (progress, soon over) or ``warning`` (something the user should know afterwards)."""

    kind: ClassVar[str] = "notice"
    text: str
    level: str = "info"


StreamEvent = (
    IterationStart
    | ToolCall
    | ToolResult
    | LlmResponse
    | ThinkingContent
    | UsageReport
    | ContextTrimmed
    | Finished
    | MessageAppended
    | SubagentEvent
    | PermissionAsked
    | Compaction
    | PlanUpdate
    | ToolDenied
    | Notice
)
EVENT_TYPES: tuple[type[_Event], ...] = get_args(StreamEvent)
KINDS: tuple[str, ...] = tuple(t.kind for t in EVENT_TYPES)


def usage_of(event: StreamEvent) -> Usage | None:
    """The tokens an event reports: a model call's, or one of a subagent's (part of the same turn)."""
    if isinstance(event, UsageReport):
        return event.usage
    if isinstance(event, SubagentEvent) and isinstance(event.event, UsageReport):
        return event.event.usage
    return None
