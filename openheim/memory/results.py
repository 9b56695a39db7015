"""What LongTermMemory's searches and maintenance return (imported on first use, not at start-up)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openheim.memory.store import Hit


@dataclass(frozen=True)
class SearchResult:
    """Hits plus which search ran: "semantic", "keyword", "hybrid", or "none" (nothing to search for)."""

    hits: list[Hit]
    mode: str
    reason: str


@dataclass(frozen=True)
class MemoryStats:
    """What ``openheim memory stats`` shows."""

    path: str
    memories: int
    embedded: int
    dimensions: int | None
    model: str | None  # the model of the stored vectors
    embedding_model: str | None  # the configured model
    vectors_available: bool
    vectors_reason: str


@dataclass(frozen=True)
class ReembedResult:
    """What a re-embedding did."""

    embedded: int
    skipped: list[int] = field(default_factory=list)  # ids the provider refused
