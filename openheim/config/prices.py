"""Model prices (``[prices."provider/model"]``) and what a call's tokens cost in US dollars.

Pure data and arithmetic: no prices are shipped, since they change and differ per account; a model
without a table has no cost (None), never a guessed one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from openheim.errors import ConfigError


class Usage(Protocol):
    """The token counts a price applies to (core's Usage)."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int


PER = 1_000_000  # prices are per million tokens
_KEYS = ("input", "output", "cache_read", "cache_write")


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens; cache reads and writes default to the input price."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        """What ``usage`` costs in dollars (fresh input, output, cache reads and cache writes)."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * read
            + usage.cache_creation_tokens * write
        ) / PER


def _number(table: dict, key: str, where: str, required: bool) -> float | None:
    value = table.get(key)
    if value is None:
        if required:
            raise ConfigError(f"'{where}.{key}' is missing; give the price in US dollars per million tokens")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError(
            f"'{where}.{key}' must be a number of US dollars per million tokens (0 or more), got {value!r}"
        )
    return float(value)


def parse_prices(d: dict) -> dict[str, Price]:
    """The ``[prices]`` table: ``"provider/model" = {input, output, cache_read?, cache_write?}``."""
    prices: dict[str, Price] = {}
    for name, table in d.items():
        where = f'prices."{name}"'
        if not isinstance(table, dict):
            raise ConfigError(f"[{where}] must be a table with input and output prices")
        if "/" not in name:
            raise ConfigError(f'[{where}] must be named "provider/model" (a provider from [providers] and its model)')
        unknown = sorted(set(table) - set(_KEYS))
        if unknown:
            raise ConfigError(f"[{where}] has an unknown key '{unknown[0]}' (known: {', '.join(_KEYS)})")
        prices[name] = Price(
            _number(table, "input", where, True) or 0.0,
            _number(table, "output", where, True) or 0.0,
            _number(table, "cache_read", where, False),
            _number(table, "cache_write", where, False),
        )
    return prices


def price_for(prices: dict[str, Price], provider: str, model: str) -> Price | None:
    return prices.get(f"{provider}/{model}")


def dollars(amount: float) -> str:
    """A cost for people: cents for most, more digits for fractions of a cent."""
    return f"${amount:.2f}" if amount >= 0.995 or amount == 0 else f"${amount:.4f}"
