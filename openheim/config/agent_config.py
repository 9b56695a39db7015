"""AgentConfig: the resolved runtime settings of one provider + model."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from openheim.config.prices import Price
from openheim.config.secrecy import scrub_url


@dataclass(frozen=True)  # its own __repr__ hides the key
class AgentConfig:
    """Everything one agent needs to run: provider, model and limits."""

    provider_name: str
    kind: str
    api_base: str
    api_key: str
    model: str
    max_iterations: int = 10
    max_parallel_tools: int = 8
    timeout_secs: int = 120
    max_tokens: int | None = None
    context_window: int | None = None
    thinking: bool = False
    max_tokens_total: int | None = None  # input + output tokens over one turn, every iteration
    turn_timeout_secs: float | None = None  # wall clock for one turn
    record: str | None = None  # write every exchange to this recording
    replay: str | None = None  # serve every exchange from this recording (no network)
    price: Price | None = None  # [prices."provider/model"]: what its tokens cost
    max_cost: float | None = None  # US dollars one turn may spend (subagents included)

    def with_(self, **changes: Any) -> AgentConfig:  # replace() checks names and values at run time
        return replace(self, **changes)

    def __repr__(self) -> str:  # never show the key
        key = "<redacted>" if self.api_key else ""
        return (
            f"AgentConfig(provider_name={self.provider_name!r}, kind={self.kind!r}, "
            f"api_base={scrub_url(self.api_base)!r}, api_key={key!r}, model={self.model!r}, "
            f"max_iterations={self.max_iterations}, timeout_secs={self.timeout_secs}, "
            f"max_tokens={self.max_tokens}, context_window={self.context_window}, thinking={self.thinking}, "
            f"max_tokens_total={self.max_tokens_total}, turn_timeout_secs={self.turn_timeout_secs})"
        )

    __str__ = __repr__
