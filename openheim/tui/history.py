"""The chat's prompt history: Up and Down walk through the prompts sent before."""

from __future__ import annotations


class PromptHistory:
    """What was typed before, for ↑/↓: the newest last; the line being written is kept while browsing."""

    def __init__(self, limit: int = 500) -> None:
        self.entries: list[str] = []
        self.limit = limit
        self.index: int | None = None  # the entry shown, None: the draft
        self.draft = ""

    def add(self, text: str) -> None:
        if not self.entries or self.entries[-1] != text:
            self.entries.append(text)
            del self.entries[: -self.limit]
        self.index = None

    def older(self, current: str) -> str | None:
        """The entry before the one shown (the newest first); None when there is none."""
        if not self.entries:
            return None
        if self.index is None:
            self.draft, self.index = current, len(self.entries) - 1
        elif self.index > 0:
            self.index -= 1
        else:
            return None
        return self.entries[self.index]

    def newer(self) -> str | None:
        """The entry after the one shown, then the draft; None when not browsing."""
        if self.index is None:
            return None
        if self.index < len(self.entries) - 1:
            self.index += 1
            return self.entries[self.index]
        self.index = None
        return self.draft
