"""Reading a conversation's message log: one ``json.loads`` over every line when all is well, line by line
(naming the bad line, dropping a torn last one) when not."""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openheim.conversation import images
from openheim.conversation.log_events import CompactionRecord, is_log_event
from openheim.core.models import Message

log = logging.getLogger(__name__)


@dataclass(eq=False)
class LogRead:
    """What reading a log file found."""

    messages: list[Message]
    size: int  # bytes up to the end of the last good line
    needs_newline: bool
    torn: bool
    compactions: list[CompactionRecord] = field(default_factory=list)
    skipped: tuple[int, ...] = ()  # line numbers that could not be read (kept in the file, left out here)


def parse_log(data: bytes, where: str = "log", images: Path | None = None) -> LogRead:
    """Parse a message log: blank lines skipped, a torn last line (one without its newline) dropped, any other
    bad line skipped with a warning (the rest of the session stays usable). Image references are read from
    ``images`` (the directory of stored images)."""
    lines = data.split(b"\n")
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    inline = _image_inliner(images) if images is not None and b'"sha256"' in data else None
    with _gc_paused():
        parsed = _parse_all_at_once(lines[: last + 1], inline)
        if parsed is None:
            return _parse_line_by_line(
                data, lines[: last + 1], where, may_be_torn=last == len(lines) - 1, inline=inline
            )
    return LogRead(parsed[0], *_good_end(data, lines, last), torn=False, compactions=parsed[1])


def _image_inliner(directory: Path) -> Callable[[Any], Any]:
    return lambda doc: images.inline(doc, directory)


def _parse_all_at_once(
    lines: list[bytes], inline: Callable[[Any], Any] | None = None
) -> tuple[list[Message], list[CompactionRecord]] | None:
    """The fast path: one json.loads over all lines; None when anything is off (then go line by line)."""
    present = [raw for raw in lines if raw.strip()]
    try:
        docs = json.loads(b"[" + b",".join(present) + b"]")
        if len(docs) != len(present):
            return None
        if inline is not None:
            docs = [doc if is_log_event(doc) else inline(doc) for doc in docs]
        if not any(b'"event"' in raw for raw in present):
            return [Message.from_dict(doc) for doc in docs], []
        messages: list[Message] = []
        compactions: list[CompactionRecord] = []
        for doc in docs:
            if is_log_event(doc):
                compactions.append(CompactionRecord.from_dict(doc))
            else:
                messages.append(Message.from_dict(doc))
        return messages, compactions
    except (ValueError, TypeError, AttributeError, RecursionError):
        return None


def _parse_line_by_line(
    data: bytes, lines: list[bytes], where: str, may_be_torn: bool, inline: Callable[[Any], Any] | None = None
) -> LogRead:
    """The slow path that names the bad line, or drops it when it is a torn last line."""
    messages: list[Message] = []
    compactions: list[CompactionRecord] = []
    skipped: list[int] = []
    last = len(lines) - 1
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
            if is_log_event(doc):
                compactions.append(CompactionRecord.from_dict(doc))
            else:
                messages.append(Message.from_dict(inline(doc) if inline is not None else doc))
        except (ValueError, TypeError, AttributeError, RecursionError) as e:
            why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
            if index != last or not may_be_torn:
                log.warning(
                    "skipping line %d of %s: not a message this version can read (%s); it was written by "
                    "a newer openheim or is damaged (the line is left in the file)",
                    index + 1,
                    where,
                    why,
                )
                skipped.append(index + 1)
                continue
            log.warning("dropping a torn last line of %s: %s", where, why)
            return LogRead(
                messages, *_good_end(data, lines, index - 1), torn=True, skipped=tuple(skipped), compactions=compactions
            )
    return LogRead(messages, *_good_end(data, lines, last), torn=False, skipped=tuple(skipped), compactions=compactions)


def _good_end(data: bytes, lines: list[bytes], last: int) -> tuple[int, bool]:
    """Byte offset just past line ``last`` (with its newline when present), and whether that newline is missing."""
    if last < 0:
        return 0, False
    end = min(sum(len(raw) + 1 for raw in lines[: last + 1]), len(data))
    return end, data[end - 1 : end] != b"\n"


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building many small objects (it would rescan them repeatedly)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def is_message(raw: bytes) -> bool:
    """Whether ``raw`` is one complete message line this version can read."""
    try:
        Message.from_dict(json.loads(raw))
    except (ValueError, TypeError, AttributeError, RecursionError):
        return False
    return True
