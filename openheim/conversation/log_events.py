"""Lines of a conversation log that are not messages: the compaction events."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from openheim.core.models import Usage

COMPACTION = "compaction"


@dataclass(eq=False)
class CompactionRecord:
    """A compaction: from here on, the model sees ``summary`` in place of messages ``[0, keep_from)``.

    ``at`` is the number of messages in the log before the event (where its line sits).
    """

    at: int
    keep_from: int
    summary: str
    model: str | None = None
    usage: Usage | None = None
    manual: bool = False
    created: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "event": COMPACTION,
            "at": self.at,
            "keep_from": self.keep_from,
            "summary": self.summary,
            "created": self.created,
        }
        if self.model:
            d["model"] = self.model
        if self.usage is not None:
            d["usage"] = self.usage.to_dict()
        if self.manual:
            d["manual"] = True
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CompactionRecord:
        at, keep_from, summary = d.get("at"), d.get("keep_from"), d.get("summary")
        if not isinstance(at, int) or not isinstance(keep_from, int) or not isinstance(summary, str):
            raise ValueError("a compaction event needs integer 'at' and 'keep_from' and a string 'summary'")
        return cls(
            at,
            keep_from,
            summary,
            d.get("model"),
            Usage.from_dict(d.get("usage")),
            bool(d.get("manual")),
            float(d.get("created") or 0),
        )


def is_log_event(doc: object) -> bool:
    return isinstance(doc, dict) and doc.get("event") == COMPACTION
