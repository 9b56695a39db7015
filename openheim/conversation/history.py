"""Conversation persistence: ``{id}.json`` metadata (atomic rewrite) and ``{id}.jsonl`` message log (append-only).

The two files are split so that a finished message costs one appended line, never a rewrite: the log is
append-first, one unbuffered write per line (in the kernel, so it survives the process being killed, at
the price of an fsync per line it does not pay), the small metadata file is replaced atomically (temp file,
fsync, rename; a new conversation's first metadata skips the fsyncs, which its save at the end of the turn does).
A crash can tear at most the last line of the log, which then lacks its newline; reading drops such a line
with a warning and the next append cuts it off before writing. A complete line that cannot be read (written by
a newer version, or damaged) is never dropped or cut: the conversation does not load until it is dealt with.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from openheim.conversation import images
from openheim.conversation.log_events import CompactionRecord
from openheim.conversation.log_files import (
    LOG_MODE,
    atomic_write,
    io_errors,
    make_dir,
    read_range,
    truncate_quietly,
    write_all,
)
from openheim.conversation.log_reader import LogRead, is_message, parse_log
from openheim.core.models import Message, Usage
from openheim.errors import (
    HistoryDiverged,
    InvalidArgument,
    NotFound,
    ParseError,
    file_error,
)

log = logging.getLogger(__name__)

TITLE_CHARS = 80
MIN_PREFIX = 4  # characters a session id prefix needs
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_session_id(session_id: str) -> str:
    """The canonical form of a session id (a UUID), or InvalidArgument."""
    try:
        return str(uuid.UUID(session_id))
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgument("invalid session id format") from None


def now_rfc3339() -> str:
    """The current UTC time as RFC 3339 with microseconds and a ``Z`` suffix."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _parse_time(text: str | None) -> datetime:
    """An RFC 3339 timestamp as an aware datetime; the epoch when missing or malformed."""
    try:
        parsed = datetime.fromisoformat(text or "")
    except ValueError:
        return _EPOCH
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def title_from(messages: Iterable[Message]) -> str | None:
    """The first 80 characters of the first user message that has text."""
    for m in messages:
        if m.role == "user":
            text = m.text()
            if text:
                return text[:TITLE_CHARS]
    return None


def validate_id(conversation_id: str) -> str:
    """Reject ids that are not a single safe file-name component."""
    if not isinstance(conversation_id, str) or not _ID_RE.match(conversation_id):
        raise InvalidArgument("invalid session id format")
    return conversation_id


_STRING_FIELDS = ("created_at", "updated_at", "model", "provider", "title", "cwd", "mode")


@dataclass
class ConversationMeta:
    """The ``meta`` object of ``{id}.json``."""

    id: str
    created_at: str = field(default_factory=now_rfc3339)
    updated_at: str = ""
    model: str | None = None
    provider: str | None = None
    title: str | None = None
    skills: list[str] = field(default_factory=list)
    cwd: str | None = None
    context_usage: Usage | None = None
    mode: str = "code"
    failed: bool = False  # its last turn failed before the model ever replied: lists hide it (--all shows it)
    cost: float | None = None  # US dollars its turns have spent (models with a [prices] entry)

    def __post_init__(self) -> None:
        self.updated_at = self.updated_at or self.created_at

    @property
    def updated(self) -> datetime:
        """``updated_at`` parsed (the epoch when malformed)."""
        return _parse_time(self.updated_at)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "created_at": self.created_at, "updated_at": self.updated_at}
        for key in ("model", "provider", "title"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        d["skills"] = list(self.skills)
        if self.cwd is not None:
            d["cwd"] = self.cwd
        if self.context_usage is not None:
            d["context_usage"] = self.context_usage.to_dict()
        d["mode"] = self.mode
        if self.failed:
            d["failed"] = True
        if self.cost is not None:
            d["cost"] = round(self.cost, 6)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ConversationMeta:
        if not isinstance(d, dict) or not isinstance(d.get("id"), str):
            raise ValueError("metadata has no string 'id'")
        for key in _STRING_FIELDS:
            if d.get(key) is not None and not isinstance(d[key], str):
                raise ValueError(f"'{key}' must be a string, got {type(d[key]).__name__}")
        skills = d.get("skills") or []
        if not isinstance(skills, list) or not all(isinstance(s, str) for s in skills):
            raise ValueError("'skills' must be a list of strings")
        created = d.get("created_at") or now_rfc3339()
        return cls(
            id=d["id"],
            created_at=created,
            updated_at=d.get("updated_at") or created,
            model=d.get("model"),
            provider=d.get("provider"),
            title=d.get("title"),
            skills=list(skills),
            cwd=d.get("cwd"),
            context_usage=Usage.from_dict(d.get("context_usage")),
            mode=d.get("mode") or "code",
            failed=d.get("failed") is True,
            cost=_cost(d.get("cost")),
        )


def _cost(value: object) -> float | None:
    """A stored cost (an unusable one is dropped, not an error: it is only a running total)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        return None
    return float(value)


@dataclass(eq=False)
class Conversation:
    """A conversation in memory: metadata, messages, and how much of the log is known to be on disk."""

    meta: ConversationMeta
    messages: list[Message] = field(default_factory=list)
    persisted: int = 0  # messages known to be in the log, in order
    log_size: int = field(default=0, repr=False)  # byte length of those lines on disk
    log_needs_newline: bool = field(default=False, repr=False)  # last good line lacks its "\n"
    compactions: list[CompactionRecord] = field(default_factory=list)  # in log order

    @property
    def id(self) -> str:
        return self.meta.id


class HistoryManager:
    """Reads and writes conversations under one history directory."""

    def __init__(self, history_dir: Path | str) -> None:
        self.dir = Path(history_dir)

    @property
    def history_dir(self) -> Path:
        return self.dir

    # --- paths ---------------------------------------------------------------

    def meta_path(self, conversation_id: str) -> Path:
        return self.dir / f"{validate_id(conversation_id)}.json"

    def log_path(self, conversation_id: str) -> Path:
        return self.dir / f"{validate_id(conversation_id)}.jsonl"

    def lock_path(self, conversation_id: str) -> Path:
        return self.dir / f"{validate_id(conversation_id)}.lock"

    # --- public API ------------------------------------------------------------

    def resolve_id(self, text: str) -> str:
        """A full session id, or a unique prefix of a stored one (as git takes commits); an ambiguous prefix
        lists the candidates, an unknown one is NotFound."""
        try:
            return check_session_id(text)
        except InvalidArgument:
            pass
        prefix = text.strip().lower() if isinstance(text, str) else ""
        if not re.fullmatch(r"[0-9a-f][0-9a-f-]*", prefix):
            raise InvalidArgument(
                f"invalid session id format: {text!r} (a session id, or the start of one; "
                "`openheim sessions list` shows them)"
            )
        if len(prefix) < MIN_PREFIX:
            raise InvalidArgument(f"session id prefix '{prefix}' is too short: give at least {MIN_PREFIX} characters")
        matches = [m for m in self.list(include_failed=True) if m.id.startswith(prefix)]
        if not matches:
            raise NotFound(f"no session id starts with '{prefix}' (`openheim sessions list --all` shows them)")
        if len(matches) > 1:
            shown = ", ".join(f"{m.id[:13]}… ({' '.join((m.title or 'untitled').split())[:30]})" for m in matches[:5])
            more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
            raise InvalidArgument(
                f"session id prefix '{prefix}' is ambiguous: it matches {shown}{more}; give more characters"
            )
        return matches[0].id

    def exists(self, conversation_id: str) -> bool:
        """Whether the conversation's metadata file exists."""
        return self.meta_path(conversation_id).is_file()

    def create(
        self,
        id: str | None = None,
        *,
        model: str | None = None,
        provider: str | None = None,
        skills: Iterable[str] = (),
        cwd: str | None = None,
        mode: str = "code",
    ) -> Conversation:
        """Start a conversation (a new uuid4 unless ``id`` is given) and save its metadata at once."""
        conversation_id = validate_id(id) if id is not None else str(uuid.uuid4())
        if self.exists(conversation_id):
            raise InvalidArgument(f"conversation {conversation_id} already exists; load it instead")
        meta = ConversationMeta(
            id=conversation_id, model=model, provider=provider, skills=_dedupe(skills), cwd=cwd, mode=mode
        )
        conv = Conversation(meta)
        log_path = self.log_path(conversation_id)
        make_dir(self.dir)
        with io_errors("write", log_path):
            os.close(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, LOG_MODE))  # empties a stray log
        # in the kernel at once, like every log line; on disk (fsync) when the turn ends and saves it again,
        # so a new conversation's first request is not kept waiting for the disk
        self.save_meta(conv, durable=False)
        return conv

    def resolve(self, id: str | None = None, **seeds: Any) -> Conversation:
        """Load ``id`` if it exists, else create it (a new id when None); ``seeds`` only apply to new ones."""
        if id is not None and self.exists(id):
            return self.load(id)
        return self.create(id, **seeds)

    def is_current(self, conv: Conversation) -> bool:
        """Whether ``conv`` still matches disk: every message written, and no one else has appended since."""
        if conv.persisted != len(conv.messages):
            return False
        try:
            return self.log_path(conv.id).stat().st_size == conv.log_size and self.meta_path(conv.id).is_file()
        except OSError:
            return False

    def load(self, conversation_id: str) -> Conversation:
        """Read a conversation's metadata and log; NotFound when it does not exist."""
        path = self.meta_path(conversation_id)
        meta = self._read_meta(path, conversation_id)
        read = self._read_log(self.log_path(conversation_id))
        if meta.title is None:
            meta.title = title_from(read.messages)
        return Conversation(
            meta,
            read.messages,
            persisted=len(read.messages),
            log_size=read.size,
            log_needs_newline=read.needs_newline,
            compactions=read.compactions,
        )

    def list(self, cwd: str | None = None, include_failed: bool = False) -> list[ConversationMeta]:
        """Every readable conversation's metadata (only those whose cwd is exactly ``cwd`` when given),
        most recently updated first; logs are not read. Sessions whose turn failed before any reply are
        left out unless ``include_failed``."""
        metas: list[ConversationMeta] = []
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return metas
        except OSError as e:  # unlike glob, say so when the directory cannot be read
            raise file_error(e, "read", self.dir) from None
        for path in (self.dir / name for name in names if name.endswith(".json")):
            if not _ID_RE.match(path.stem):
                continue
            try:
                meta = _parse_meta(path.read_bytes())
            except (OSError, ValueError) as e:
                log.warning("skipping unreadable conversation metadata %s: %s", path, e)
                continue
            meta.id = path.stem
            if (cwd is None or meta.cwd == cwd) and (include_failed or not meta.failed):
                metas.append(meta)
        metas.sort(key=lambda m: m.updated, reverse=True)
        return metas

    def delete(self, conversation_id: str) -> None:
        """Remove a conversation's metadata, log and lock; NotFound when it does not exist."""
        meta = self.meta_path(conversation_id)
        if not meta.is_file():
            raise NotFound(f"Conversation {conversation_id} not found")
        for path in (meta, self.log_path(conversation_id), self.lock_path(conversation_id)):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as e:
                raise file_error(e, "delete", path) from None

    def save_meta(self, conv: Conversation, *, durable: bool = True) -> None:
        """Bump ``updated_at``, fill the title, and atomically rewrite ``{id}.json`` (``durable``: fsync'd)."""
        if conv.meta.title is None:
            conv.meta.title = title_from(conv.messages)
        conv.meta.updated_at = now_rfc3339()
        body = json.dumps({"meta": conv.meta.to_dict()}, ensure_ascii=False, indent=2) + "\n"
        atomic_write(self.meta_path(conv.id), body.encode("utf-8"), durable=durable)

    def roll_back(self, conv: Conversation, count: int, log_size: int, needs_newline: bool) -> None:
        """Forget everything after the first ``count`` messages, in memory and on disk (the log is cut back
        to ``log_size`` bytes, which needs no free space): a turn that could not be saved leaves the log as
        it was before it. The caller holds the session's lease, so the lines after ``log_size`` are its own."""
        path = self.log_path(conv.id)
        with io_errors("write", path):
            fd = os.open(path, os.O_RDWR)
            try:
                if os.fstat(fd).st_size > log_size:
                    os.ftruncate(fd, log_size)
            finally:
                os.close(fd)
        del conv.messages[count:]
        conv.persisted, conv.log_size, conv.log_needs_newline = count, log_size, needs_newline

    def append_message(self, conv: Conversation, message: Message) -> None:
        """Append one message to the log as a compact JSON line, written straight through (no user-space buffer).

        The caller keeps ``conv.messages`` (the agent loop has already added ``message``); this only
        writes the line. Cost does not depend on the log's length: the log is never re-read. A torn
        last line left by a crash is cut off first; lines written by someone else raise HistoryDiverged.
        """
        self._append_line(conv, self._line(message))
        conv.persisted += 1
        text = message.text()
        if conv.meta.title is None and message.role == "user" and text:
            conv.meta.title = text[:TITLE_CHARS]

    def append_compaction(self, conv: Conversation, record: CompactionRecord) -> None:
        """Append a compaction event to the log (it sits after the ``record.at`` messages before it)."""
        self._append_line(conv, record.to_json().encode("utf-8"))
        conv.compactions.append(record)

    def _append_line(self, conv: Conversation, text: bytes) -> None:
        line = text + b"\n"
        if conv.log_needs_newline:
            line = b"\n" + line
        path = self.log_path(conv.id)
        make_dir(self.dir)
        with io_errors("write", path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, LOG_MODE)
            try:
                self._check_tail(fd, conv)
                os.lseek(fd, conv.log_size, os.SEEK_SET)
                try:
                    write_all(fd, line)
                except OSError:
                    truncate_quietly(fd, conv.log_size)  # leave no torn line of ours behind (a full disk)
                    raise
            finally:
                os.close(fd)
        conv.log_size += len(line)
        conv.log_needs_newline = False

    def save_conversation(self, conv: Conversation) -> None:
        """Atomically rewrite the whole log from memory, then the metadata.

        Raises HistoryDiverged when the log on disk is not a prefix of ``conv.messages``.
        """
        path = self.log_path(conv.id)
        read = self._read_log(path)
        if read.skipped:
            raise ParseError(
                f"line {read.skipped[0]} of {path} is not a message this version can read, and "
                "rewriting the log would lose it: upgrade openheim or repair that line (the log was "
                "left untouched)"
            )
        on_disk = read.messages
        if len(on_disk) > len(conv.messages) or any(a.to_dict() != b.to_dict() for a, b in zip(on_disk, conv.messages)):
            raise HistoryDiverged(conv.id)
        body = b"".join(line + b"\n" for line in self._log_lines(conv))
        atomic_write(path, body)
        conv.persisted, conv.log_size, conv.log_needs_newline = len(conv.messages), len(body), False
        self.save_meta(conv)

    def _log_lines(self, conv: Conversation) -> Iterator[bytes]:
        """The log's lines in order: messages, each compaction event after the messages that preceded it."""
        events = sorted(conv.compactions, key=lambda c: c.at)
        e = 0
        for index, message in enumerate(conv.messages):
            while e < len(events) and events[e].at <= index:
                yield events[e].to_json().encode("utf-8")
                e += 1
            yield self._line(message)
        for event in events[e:]:
            yield event.to_json().encode("utf-8")

    def _line(self, message: Message) -> bytes:
        """A message's log line (images stored once, by hash, in ``images/``)."""
        return images.line(message, self.dir / images.IMAGES)

    # --- reading ---------------------------------------------------------------

    def _read_meta(self, path: Path, conversation_id: str) -> ConversationMeta:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"Conversation {conversation_id} not found at {path}") from None
        except OSError as e:
            raise file_error(e, "read", path) from None
        try:
            meta = _parse_meta(data)
        except ValueError as e:
            raise ParseError(f"conversation metadata {path} is unreadable ({e}); restore or delete the file") from None
        meta.id = conversation_id
        return meta

    def _read_log(self, path: Path) -> LogRead:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return LogRead([], 0, False, False)
        except OSError as e:
            raise file_error(e, "read", path) from None
        return parse_log(data, str(path), self.dir / "images")

    def _check_tail(self, fd: int, conv: Conversation) -> None:
        """Make sure the file holds exactly our known lines, dropping a torn tail if there is one."""
        size = os.fstat(fd).st_size
        if size == conv.log_size:
            return
        if size < conv.log_size:
            raise HistoryDiverged(conv.id)
        tail = read_range(fd, conv.log_size, size - conv.log_size)
        body = tail[1:] if conv.log_needs_newline and tail.startswith(b"\n") else tail
        if body.strip() and (b"\n" in body or is_message(body)):  # complete lines: someone else wrote them
            raise HistoryDiverged(conv.id)
        log.warning("cutting a torn last line (%d bytes) off %s", len(tail), self.log_path(conv.id))
        os.ftruncate(fd, conv.log_size)


# --- helpers ----------------------------------------------------------------------


def _parse_meta(data: bytes) -> ConversationMeta:
    """The metadata in ``data``; ValueError for anything malformed."""
    try:
        doc = json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(doc, dict):
        raise ValueError("expected a JSON object")
    try:
        return ConversationMeta.from_dict(doc.get("meta", doc))
    except (TypeError, AttributeError) as e:
        raise ValueError(f"malformed field: {e}") from None


def _dedupe(names: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for name in names:
        seen.setdefault(name, None)
    return list(seen)
