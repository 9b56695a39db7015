"""`openheim doctor`'s report: one Check per line (ok, warn, FAIL or --), as lines or one JSON object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MARKS = {"ok": "ok", "warn": "warn", "fail": "FAIL", "info": "--"}


@dataclass
class Check:
    key: str  # the JSON member ("providers" checks are collected in a list)
    label: str  # the human line's name
    status: str  # ok | warn | fail | info
    detail: str
    facts: dict[str, Any] = field(default_factory=dict)


def exit_code(checks: list[Check]) -> int:
    return 1 if any(c.status == "fail" for c in checks) else 0


def as_json(checks: list[Check]) -> dict[str, Any]:
    """One object: ``ok``, ``exit_code``, then one member per check (``providers`` is a list)."""
    out: dict[str, Any] = {"ok": exit_code(checks) == 0, "exit_code": exit_code(checks), "providers": []}
    for c in checks:
        entry = {"status": c.status, "detail": c.detail, **c.facts}
        if c.key == "providers":
            out["providers"].append(entry)
        else:
            out[c.key] = entry
    return out


def as_lines(checks: list[Check]) -> list[str]:
    """Aligned human lines: mark, name, detail; then a summary."""
    width = max(len(c.label) for c in checks)
    lines = [f"{MARKS[c.status]:<4}  {c.label:<{width}}  {c.detail}" for c in checks]
    fails = [c.label for c in checks if c.status == "fail"]
    warns = sum(c.status == "warn" for c in checks)
    if fails:
        lines.append(f"not ready: {', '.join(fails)} failed" + (f"; {warns} warning(s)" if warns else ""))
    else:
        lines.append("ready" + (f" ({warns} warning(s))" if warns else ""))
    return lines
