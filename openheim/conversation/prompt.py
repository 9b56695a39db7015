"""PromptBuilder: the one system message sent before the history.

Sections, in this fixed order, joined by ``\\n\\n---\\n\\n``:

1. the fixed line "You are a general purpose multiprovider LLM agent.";
2. the identity: "The user has given you the following identity:\\n\\n{identity}" (whitespace kept; left out
   when the identity is blank);
3. project instructions, one section per file, outermost first:
   "Project instructions from {relpath}:\\n\\n{content}";
4. the skills: "These are the skills you have mastered:\\n\\n" followed by one ``### {name}\\n\\n{content}``
   block per skill, the blocks joined by ``\\n\\n---\\n\\n`` (left out when there are none).

No system message at all is built when the identity is blank and there are no instructions and no skills.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from openheim.conversation.instructions import Instruction
from openheim.conversation.skills import Skill
from openheim.core.models import Message

BASE_LINE = "You are a general purpose multiprovider LLM agent."
SEPARATOR = "\n\n---\n\n"


def identity_section(identity: str) -> str:
    return f"The user has given you the following identity:\n\n{identity}"


def instruction_section(item: Instruction) -> str:
    return f"Project instructions from {item.relpath}:\n\n{item.content}"


def skills_section(skills: Sequence[Skill]) -> str:
    blocks = SEPARATOR.join(f"### {s.name}\n\n{s.content}" for s in skills)
    return f"These are the skills you have mastered:\n\n{blocks}"


@dataclass(eq=False)
class PromptBuilder:
    """The parts of a system prompt; ``build()`` assembles them."""

    identity: str = ""
    skills: list[Skill] = field(default_factory=list)
    instructions: list[Instruction] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # e.g. skills that failed to load

    def sections(self) -> list[str]:
        """The non-empty sections in their documented order."""
        parts = [BASE_LINE]
        if self.identity.strip():
            parts.append(identity_section(self.identity))
        parts.extend(instruction_section(i) for i in self.instructions)
        if self.skills:
            parts.append(skills_section(self.skills))
        return parts

    def text(self) -> str | None:
        """The system prompt text, or None when there is nothing beyond the fixed line."""
        if not self.identity.strip() and not self.skills and not self.instructions:
            return None
        return SEPARATOR.join(self.sections())

    def build(self) -> Message | None:
        """The system message, or None (then the history is sent as-is)."""
        text = self.text()
        return Message.system(text) if text is not None else None
