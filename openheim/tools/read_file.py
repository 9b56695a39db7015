"""read_file: one page of a text file, with notes that tell the model how to read on."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from openheim.core.client_io import reader
from openheim.core.tool_args import optional_int, require_str
from openheim.core.tools import BaseTool, ToolView, ViewContext
from openheim.errors import Cancelled, InvalidArgument, ToolExecutionError
from openheim.tools.presentation import path_view
from openheim.tools.sandbox import open_file, validate_path
from openheim.tools.specs import READ_FILE

if TYPE_CHECKING:
    import mmap

    from openheim.core.turn_context import TurnContext

    Buffer = bytes | mmap.mmap  # a file read whole, or mapped

CAP = 102400
SCAN_LIMIT = 64 * 1024 * 1024
WHOLE_LIMIT = 16 * 1024 * 1024
_CHUNK = 1 << 20
NOT_UTF8 = "the file is not valid UTF-8 text"
CANCELLED = "file read cancelled"


def _count_nl(buf: Buffer, start: int, end: int) -> int:
    """Newlines in buf[start:end], counted a chunk at a time (mmap has no count)."""
    total = 0
    for pos in range(start, end, _CHUNK):
        total += bytes(buf[pos : min(pos + _CHUNK, end)]).count(b"\n")
    return total


def _validate_utf8(buf: Buffer, end: int) -> None:
    """Raise unless buf[:end] is valid UTF-8 (a character cut at ``end`` is fine unless it is EOF)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for pos in range(0, end, _CHUNK):
            stop = min(pos + _CHUNK, end)
            decoder.decode(bytes(buf[pos:stop]), final=stop == len(buf))
    except UnicodeDecodeError:
        raise ToolExecutionError(NOT_UTF8) from None


def _line_start(buf: Buffer, offset: int) -> int | None:
    """Byte index where 1-based line ``offset`` starts, or None when it is past the end; a ToolExecutionError
    when it does not start within the first SCAN_LIMIT bytes (a huge or sparse file is never scanned whole)."""
    n, pos, remaining = len(buf), 0, offset - 1
    while remaining > 0 and pos < n:
        if pos >= SCAN_LIMIT:
            raise ToolExecutionError(
                f"line {offset} does not start within the first {SCAN_LIMIT >> 20} MiB of the "
                "file, which read_file does not scan past; use search to find what you need"
            )
        end = min(pos + _CHUNK, n)
        found = _count_nl(buf, pos, end)
        if found < remaining:
            remaining -= found
            pos = end
            continue
        for _ in range(remaining):
            pos = buf.find(b"\n", pos, end) + 1
        remaining = 0
    return pos if remaining == 0 and pos < n else None


def _select(buf: Buffer, start: int, limit: int | None) -> tuple[int, int]:
    """(end byte, whole lines taken) from ``start`` within the byte cap and the line limit."""
    n, pos, count = len(buf), start, 0
    stop = min(n, start + CAP)  # never look past what can be returned (a long line may be huge)
    while pos < n and (limit is None or count < limit):
        nl = buf.find(b"\n", pos, stop)
        end = (n if stop == n else stop + 1) if nl < 0 else nl + 1
        if end - start > CAP:
            break
        pos, count = end, count + 1
    return pos, count


def utf8_cut(data: bytes, size: int) -> bytes:
    """The longest prefix of ``data`` within ``size`` bytes that does not split a character."""
    if len(data) <= size:
        return data
    cut = size
    while cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut]


def _total_lines(buf: Buffer) -> int | None:
    n = len(buf)
    if n > SCAN_LIMIT:
        return None
    return _count_nl(buf, 0, n) + (1 if n and buf[n - 1 : n] != b"\n" else 0)


def with_note(text: str, note: str) -> str:
    """Text followed by a note on its own line."""
    if text and not text.endswith("\n"):
        text += "\n"
    return text + note


def _of(total: int | None) -> str:
    return f" of {total}" if total is not None else ""


def page_buffer(buf: Buffer, offset: int, limit: int | None) -> str:
    """The page of ``buf`` starting at line ``offset`` with the reference's notes (pure over bytes)."""
    total = _total_lines(buf)
    start = _line_start(buf, offset)
    if start is None:
        if offset == 1:
            return ""
        _validate_utf8(buf, min(len(buf), SCAN_LIMIT))
        if total is None:
            return f"[nothing at offset {offset}]"
        return f"[offset {offset} is past the end of the file, which has {total} lines]"
    end, count = _select(buf, start, limit)
    _validate_utf8(buf, max(min(len(buf), SCAN_LIMIT), end, min(start + CAP + 4, len(buf))))
    if count == 0:
        head = utf8_cut(bytes(buf[start : start + CAP + 4]), CAP).decode("utf-8")
        more = total is None or offset < total
        tail = f"; call again with offset={offset + 1} for the lines after it" if more else ""
        return with_note(head, f"[line {offset}{_of(total)} is longer than {CAP} bytes; only its start is shown{tail}]")
    text = bytes(buf[start:end]).decode("utf-8")
    if end >= len(buf):
        return text
    last = offset + count - 1
    return with_note(text, f"[lines {offset}–{last}{_of(total)} shown; call again with offset={last + 1} to read on]")


def page_client_text(text: str, offset: int, limit: int | None = None) -> str:
    """Cap text a client returned for (offset, limit + 1) to ``limit`` lines and CAP bytes (total unknown).

    The caller asks the client for one line more than ``limit``: getting it back means more follows.
    """
    if not text:
        return f"[nothing at offset {offset}]" if offset > 1 else ""
    data = text.encode("utf-8")
    end, count = _select(data, 0, limit)
    if count == 0:
        head = utf8_cut(data, CAP).decode("utf-8")
        return with_note(
            head,
            f"[line {offset} is longer than {CAP} bytes; only its start is shown; "
            f"call again with offset={offset + 1} for the lines after it]",
        )
    if end >= len(data):
        return text
    last = offset + count - 1
    return with_note(
        data[:end].decode("utf-8"), f"[lines {offset}–{last} shown; call again with offset={last + 1} to read on]"
    )


def open_regular(path: Path) -> BinaryIO:
    """Open a regular file for binary reading, with messages for the usual mistakes."""
    try:
        # open_file: the sandbox resolved every link, so a link swapped in since then is refused;
        # O_NONBLOCK: opening a FIFO must not hang (it is refused below as not a regular file).
        f = open(open_file(path, os.O_RDONLY | os.O_NONBLOCK), "rb")  # noqa: SIM115 (returned to the caller)
    except FileNotFoundError:
        raise ToolExecutionError(f"file '{path}' not found") from None
    except IsADirectoryError:
        raise ToolExecutionError(f"'{path}' is a directory; use list_dir to see its entries") from None
    except OSError as e:
        raise ToolExecutionError(f"cannot read '{path}': {e.strerror or e}") from None
    mode = os.fstat(f.fileno()).st_mode
    if not stat.S_ISREG(mode):
        f.close()
        kind = "a directory; use list_dir to see its entries" if stat.S_ISDIR(mode) else "not a regular file"
        raise ToolExecutionError(f"'{path}' is {kind}")
    return f


def read_local_page(path: Path, offset: int, limit: int | None) -> str:
    """Page a file on the local disk without loading more than needed."""
    with open_regular(path) as f:
        if os.fstat(f.fileno()).st_size == 0:
            return page_buffer(b"", offset, limit)
        import mmap

        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return page_buffer(buf, offset, limit)


def read_whole_text(path: Path, ctx: TurnContext) -> str:
    """The whole file as text (client first), refused over WHOLE_LIMIT bytes; used by edit_file."""
    client = reader(ctx.client_io)
    if client is not None:
        try:
            return client.read_text_file(path, None, None, ctx.cancel)
        except Cancelled:
            raise ToolExecutionError(CANCELLED) from None
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > WHOLE_LIMIT:
            raise ToolExecutionError(
                f"the file is {size} bytes; only files up to {WHOLE_LIMIT} bytes can be read whole"
            )
        data = f.read(WHOLE_LIMIT + 1)  # it may have grown since the fstat
    if len(data) > WHOLE_LIMIT:
        raise ToolExecutionError(f"the file is over {WHOLE_LIMIT} bytes; only files up to that can be read whole")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolExecutionError(NOT_UTF8) from None


class ReadFileTool(BaseTool):
    """Read a text file a page at a time."""

    name, description, parameters, capabilities = READ_FILE.fields()

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        return path_view("Read", self.capabilities.kind, args, where, line=(args or {}).get("offset"))

    def execute(self, args: dict, ctx: TurnContext) -> str:
        requested = require_str(args, "path")
        offset = optional_int(args, "offset", minimum=0)
        limit = optional_int(args, "limit", minimum=0)
        if offset == 0 or limit == 0:
            raise InvalidArgument("offset and limit must be at least 1")
        path = validate_path(requested, ctx.work_dir, ctx.effective_cwd)
        if ctx.cancel.cancelled:
            raise ToolExecutionError(CANCELLED)
        client = reader(ctx.client_io)
        if client is not None:
            try:  # one line more than asked for tells whether the file goes on
                text = client.read_text_file(path, offset, limit and limit + 1, ctx.cancel)
            except Cancelled:
                raise ToolExecutionError(CANCELLED) from None
            return page_client_text(text, offset or 1, limit)
        result = read_local_page(path, offset or 1, limit)
        if ctx.cancel.cancelled:
            raise ToolExecutionError(CANCELLED)
        return result
