"""The recording file of ``openheim run --record`` / ``--replay``: JSON Lines a person can read and edit.

Line 1 is the header, ``{"openheim_recording": 1, "provider", "kind", "model", "thinking", "max_tokens"}``:
the version of this format and the provider it was recorded from (its ``kind`` names the wire a replay
speaks). Every further line is one provider exchange, written as soon as it ends::

    {"request": {"method", "path", "headers", "body"},
     "response": {"status", "headers", "body"},   # body: the bytes as received (or "body_base64")
     "error": "..."}                               # only when the connection failed or dropped

Secrets never reach the file: key headers are left out and known secrets are redacted. A run that
crashed leaves a readable prefix; a torn last line (no newline, not JSON) is dropped on reading.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openheim.errors import ConfigError

VERSION = 1
MARK = "openheim_recording"


@dataclass
class Recording:
    """A recording file: its header and the exchanges it holds."""

    path: Path
    header: dict[str, Any]
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False  # the last line was torn (the recorded run was cut off mid-write)


def response_bytes(response: dict[str, Any]) -> bytes:
    """The recorded body's bytes (text as UTF-8, or decoded base64)."""
    if "body_base64" in response:
        return base64.b64decode(response["body_base64"])
    return str(response.get("body", "")).encode("utf-8")


def body_fields(data: bytes) -> dict[str, str]:
    """``{"body": text}`` for UTF-8, else ``{"body_base64": ...}``, so replay gives back the same bytes."""
    try:
        return {"body": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_base64": base64.b64encode(data).decode("ascii")}


def read_header(path: str | Path) -> dict[str, Any]:
    """Only the header of a recording (what a ``replay`` provider needs to know which wire it speaks)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            first = f.readline(1 << 20)
    except OSError:
        return read_recording(p).header  # the full read names the problem
    try:
        header = json.loads(first)
    except ValueError:
        return read_recording(p).header
    if not isinstance(header, dict) or header.get(MARK) != VERSION:
        return read_recording(p).header
    return header


def read_recording(path: str | Path) -> Recording:
    """The header and exchanges of a recording, or a one-line ConfigError saying what is wrong with it."""
    p = Path(path)
    rerecord = f"record it again with openheim run --record {p}"
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"recording {p} does not exist; {rerecord}") from None
    except OSError as e:
        raise ConfigError(f"cannot read recording {p}: {e.strerror or e}") from None
    lines = data.split(b"\n")
    torn = lines.pop()  # after the last newline: b"" unless the writer was cut off
    values = [_line(p, i + 1, line) for i, line in enumerate(lines) if line.strip()]
    truncated = False
    if torn.strip():
        try:
            values.append(json.loads(torn))
        except ValueError:
            truncated = True
    if not values:
        raise ConfigError(f"recording {p} is empty (the recorded run ended before its first request); {rerecord}")
    header = values[0]
    if not isinstance(header, dict) or MARK not in header:
        raise ConfigError(f"{p} is not an openheim recording (its first line has no {MARK!r}); {rerecord}")
    if header[MARK] != VERSION:
        raise ConfigError(
            f"recording {p} has format version {header[MARK]!r}; this openheim reads version {VERSION}; {rerecord}"
        )
    for n, value in enumerate(values[1:], 2):
        if (
            not isinstance(value, dict)
            or not isinstance(value.get("request"), dict)
            or not isinstance(value["request"].get("body"), dict)
        ):
            raise ConfigError(
                f"line {n} of recording {p} is not an exchange (it needs request.body); fix the line or {rerecord}"
            )
    return Recording(p, header, values[1:], truncated)


def _line(path: Path, n: int, line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError as e:  # JSONDecodeError, or UnicodeDecodeError for bytes that are not UTF-8
        why = e.msg if isinstance(e, json.JSONDecodeError) else "not UTF-8"
        raise ConfigError(
            f"line {n} of recording {path} is not valid JSON ({why}); fix the line or "
            f"record it again with openheim run --record {path}"
        ) from None
