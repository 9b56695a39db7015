"""ConversationStore: the history, skills and identity of one data directory, and per-turn prompt preparation."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from openheim.conversation.history import Conversation, HistoryManager
from openheim.conversation.identity import load_identity
from openheim.conversation.instructions import load_instructions
from openheim.conversation.prompt import PromptBuilder
from openheim.conversation.skills import Skill, SkillsManager
from openheim.errors import OpenheimError

log = logging.getLogger(__name__)


class ConversationStore:
    """``{data_dir}/history``, ``{data_dir}/skills`` and ``{data_dir}/system.md`` behind one object."""

    def __init__(
        self, data_dir: Path | str, history_dir: Path | str | None = None, skills_dir: Path | str | None = None
    ) -> None:
        self.data_dir = Path(data_dir)
        self.history = HistoryManager(Path(history_dir) if history_dir else self.data_dir / "history")
        self.skills = SkillsManager(Path(skills_dir) if skills_dir else self.data_dir / "skills")

    def prepare(
        self,
        conversation: Conversation,
        sandbox_root: Path | str,
        cwd: Path | str | None = None,
        extra_skills: Iterable[str] = (),
        include_instructions: bool = True,
    ) -> PromptBuilder:
        """The prompt for one turn: system.md, the conversation's skills plus ``extra_skills``, AGENTS.md files.

        A skill that no longer loads is skipped with a warning (kept in ``builder.warnings``); an
        unreadable system.md raises ConfigError.
        """
        builder = PromptBuilder(identity=load_identity(self.data_dir))
        builder.skills = self._load_skills([*conversation.meta.skills, *extra_skills], builder.warnings)
        if include_instructions:
            builder.instructions = load_instructions(sandbox_root, cwd)
        return builder

    def _load_skills(self, names: list[str], warnings: list[str]) -> list[Skill]:
        loaded: list[Skill] = []
        for name in dict.fromkeys(names):
            try:
                loaded.append(self.skills.load(name))
            except OpenheimError as e:
                log.warning("skipping skill %s: %s", name, e)
                warnings.append(f"skill '{name}' was skipped: {e}")
        return loaded
