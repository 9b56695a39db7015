"""A fake Anthropic server that bills like the real prompt cache, for tests and the cost benchmark.

The prompt is a sequence of blocks in the API's prefix order (each tool, each system block, each content
block of each message), ``cache_control`` taken out. A block marked ``cache_control`` is a breakpoint: the
prefix up to it is cached (written) once it is at least ``MIN_TOKENS`` long. A request reads from the
cache the longest prefix that a previous request wrote and that ends at one of its breakpoints or at most
``LOOKBACK`` blocks before one. Reported usage: ``cache_read_input_tokens`` (that prefix),
``cache_creation_input_tokens`` (from there to the last breakpoint), ``input_tokens`` (the rest).
Tokens are estimated as a block's JSON length / 4.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fake_llm import FakeLLMServer, Reply

MIN_TOKENS = 1024
LOOKBACK = 20


def prompt_blocks(body: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
    """(block without cache_control, is a breakpoint) in prefix order."""
    blocks = [*body.get("tools", []), *body.get("system", [])]
    for message in body.get("messages", []):
        content = message["content"]
        blocks += [
            {"role": message["role"], **b}
            for b in (content if isinstance(content, list) else [{"type": "text", "text": content}])
        ]
    return [({k: v for k, v in b.items() if k != "cache_control"}, "cache_control" in b) for b in blocks]


def tokens(block: dict[str, Any]) -> int:
    return max(1, len(json.dumps(block, separators=(",", ":"))) // 4)


class PromptCache:
    """Prefix hashes written so far, and the usage each request is billed."""

    def __init__(self) -> None:
        self.written: set[str] = set()

    def bill(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(input, cache read, cache written) tokens of one request; remembers what it wrote."""
        blocks = prompt_blocks(body)
        digests, sizes, h = [], [], hashlib.sha256()
        for block, _ in blocks:
            h.update(json.dumps(block, sort_keys=True).encode())
            digests.append(h.copy().hexdigest())
            sizes.append(tokens(block))
        ends = [i for i, (_, marked) in enumerate(blocks) if marked]
        hit = -1
        for end in ends:
            for i in range(end, max(-1, end - LOOKBACK - 1), -1):
                if digests[i] in self.written:
                    hit = max(hit, i)
                    break
        last = ends[-1] if ends else -1
        read = sum(sizes[: hit + 1])
        written = sum(sizes[hit + 1 : last + 1]) if last > hit else 0
        for end in ends:
            if sum(sizes[: end + 1]) >= MIN_TOKENS:
                self.written.add(digests[end])
        if not any(sum(sizes[: e + 1]) >= MIN_TOKENS for e in ends if e > hit):
            written = 0  # too short to cache: billed as plain input
        return sum(sizes) - read - written, read, written


class CachingAnthropic(FakeLLMServer):
    """The Anthropic wire whose every reply reports the usage ``PromptCache`` bills for its request."""

    def __init__(self, **options: Any) -> None:
        super().__init__(wire="anthropic", **options)
        self.cache = PromptCache()
        self.billed: list[tuple[int, int, int]] = []

    def next_item(self, body: Any) -> Any:
        item = super().next_item(body)
        if isinstance(item, Reply):
            inp, read, written = self.cache.bill(body)
            self.billed.append((inp, read, written))
            item.usage = (inp, 5, read, written)
        return item
