"""What a turn spends in US dollars: one meter shared by the turn and the subagents it starts."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.core.models import Usage


class Spend:
    """Dollars spent by one turn (``turn``) on top of what the session had spent before it (``before``).

    ``priced`` turns False once a call of a model without a price was made: the figure is then a floor.
    """

    def __init__(self, before: float = 0.0) -> None:
        self.before = before
        self.turn = 0.0
        self.priced = True
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

    @property
    def total(self) -> float:
        return self.before + self.turn
