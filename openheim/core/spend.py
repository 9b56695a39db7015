"""What a turn spends in US dollars: one meter shared by the turn and the subagents it starts.

A budget must not be switched off by a server's numbers: every token count is clamped at 0
(``counted``), and a reply that carries no usage at all is, when a budget is set, counted as an
estimate from the bytes sent and received (``BYTES_PER_TOKEN``), said once per turn (``estimate_notice``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from openheim.core.models import Usage

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig

BYTES_PER_TOKEN = 4  # English text and JSON run about 4 bytes a token in the common tokenizers
ESTIMATE_NOTICE = (
    "the provider reported no token usage; the cost budget counts an estimate "
    f"(about {BYTES_PER_TOKEN} bytes a token of what was sent and received)"
)


class EstimatedUsage(Usage):
    """Token counts estimated from bytes, for a reply that reported none."""


def counted(usage: Usage) -> Usage:
    """``usage`` with every count at 0 or more (a negative count would lower what a turn has spent)."""
    if min(usage.input_tokens, usage.output_tokens, usage.cache_creation_tokens, usage.cache_read_tokens) >= 0:
        return usage
    return type(usage)(
        max(usage.input_tokens, 0),
        max(usage.output_tokens, 0),
        max(usage.cache_creation_tokens, 0),
        max(usage.cache_read_tokens, 0),
    )


def estimate(sent_bytes: int, received_bytes: int) -> EstimatedUsage:
    """The usage of a call that sent and received that many bytes (rounded up, so never free)."""
    return EstimatedUsage(-(-sent_bytes // BYTES_PER_TOKEN), -(-received_bytes // BYTES_PER_TOKEN))


class Spend:
    """Dollars spent by one turn (``turn``) on top of what the session had spent before it (``before``).

    ``priced`` turns False once a call of a model without a price was made: the figure is then a floor.
    """

    def __init__(self, before: float = 0.0) -> None:
        self.before = before
        self.turn = 0.0
        self.priced = True
        self.estimated = False  # an estimated usage was counted (and said)
        self._lock = threading.Lock()

    def add(self, cfg: AgentConfig, usage: Usage) -> float | None:
        """Count one call's usage at ``cfg``'s price; returns its cost (None: the model has no price)."""
        if cfg.price is None:
            with self._lock:
                self.priced = False
            return None
        cost = cfg.price.cost(usage)
        with self._lock:
            self.turn += cost
        return cost

    def estimate_notice(self, usage: Usage) -> str | None:
        """The notice to show when ``usage`` is the turn's first estimated one, else None."""
        if not isinstance(usage, EstimatedUsage):
            return None
        with self._lock:
            first, self.estimated = not self.estimated, True
        return ESTIMATE_NOTICE if first else None

    @property
    def total(self) -> float:
        return self.before + self.turn
