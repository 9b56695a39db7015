"""update_plan: the model keeps a short step list the user can watch (ACP ``plan`` updates, stream-json
``plan`` events, the chat's ``:plan``, the web page's list)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openheim.core.events import PlanUpdate
from openheim.core.tool_args import describe_json, optional_str
from openheim.core.tools import BaseTool, ToolView, ViewContext
from openheim.errors import ParseError
from openheim.tools.specs import UPDATE_PLAN

if TYPE_CHECKING:
    from openheim.core.turn_context import TurnContext

STATUSES = ("pending", "in_progress", "completed")
MAX_STEPS = 50
MARKS = {"pending": "○", "in_progress": "▸", "completed": "✓"}


def parse_plan(args: dict) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """((step, status), ...) and the explanation from the tool's arguments; ParseError says what is wrong."""
    plan = args.get("plan")
    if not isinstance(plan, list) or not plan:
        raise ParseError(f"'plan' must be a non-empty array of {{step, status}} objects, got {describe_json(plan)}")
    if len(plan) > MAX_STEPS:
        raise ParseError(f"'plan' has {len(plan)} steps; keep it to {MAX_STEPS} or fewer")
    steps = []
    for n, entry in enumerate(plan, 1):
        if not isinstance(entry, dict):
            raise ParseError(f"plan step {n} must be an object with 'step' and 'status'")
        step, status = entry.get("step"), entry.get("status")
        if not isinstance(step, str) or not step.strip():
            raise ParseError(f"plan step {n} needs a non-empty 'step' text")
        if status not in STATUSES:
            shown = f'"{status}"' if isinstance(status, str) else describe_json(status)
            raise ParseError(f"plan step {n} has status {shown}; use one of {', '.join(STATUSES)}")
        steps.append((" ".join(step.split()), status))
    if sum(1 for _, s in steps if s == "in_progress") > 1:
        raise ParseError("at most one plan step can be in_progress at a time")
    return tuple(steps), optional_str(args, "explanation")


def plan_text(steps: tuple[tuple[str, str], ...]) -> str:
    """The plan as lines with a mark per status (○ pending, ▸ in progress, ✓ completed)."""
    return "\n".join(f"{MARKS[status]} {step}" for step, status in steps)


class UpdatePlanTool(BaseTool):
    """Replace the turn's plan: the whole list each time, at most one step in progress."""

    name, description, parameters, capabilities = UPDATE_PLAN.fields()

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        return ToolView("Update plan", self.capabilities.kind)

    def execute(self, args: dict, ctx: TurnContext) -> str:
        steps, explanation = parse_plan(args)
        if ctx.emit is not None:
            ctx.emit(PlanUpdate(tuple({"step": s, "status": st} for s, st in steps), explanation))
        done = sum(1 for _, s in steps if s == "completed")
        return f"Plan updated ({done} of {len(steps)} steps completed):\n{plan_text(steps)}"
