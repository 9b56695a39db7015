"""web_fetch's body: read within the size cap, a gzip or deflate body decoded as it arrives.

Decoding stops as soon as the decoded text passes the cap, so a small compressed body that would
expand to gigabytes (a gzip bomb) costs no more than the cap; the compressed bytes read are capped too.
"""

from __future__ import annotations

import zlib
from typing import Any, Protocol

READ_SIZE = 65536
RAW_FACTOR = 4  # a compressed body may be read up to this many times the cap (bytes that decode to nothing)
_GZIP = ("gzip", "x-gzip")
_PLAIN = ("", "identity")


class Readable(Protocol):
    def read(self, amt: int) -> bytes: ...


def read_decoded(resp: Readable, content_encoding: str, cap: int) -> bytes:
    """Up to ``cap + 1`` bytes of the decoded body (more than ``cap``: the body was cut at the cap).

    An encoding other than gzip, deflate or identity, and a corrupt or cut compressed body, are ValueErrors
    whose text says so in one line.
    """
    encoding = content_encoding.strip().lower()
    if encoding in _PLAIN:
        return _read_plain(resp, cap + 1)
    if encoding not in (*_GZIP, "deflate"):
        raise ValueError(f"the body is compressed with {content_encoding.strip()!r}, which web_fetch cannot decode")
    inflater = _Inflater(encoding in _GZIP)
    out = bytearray()
    raw_left = cap * RAW_FACTOR
    while len(out) <= cap and raw_left > 0:
        data = resp.read(min(READ_SIZE, raw_left))
        if not data:
            break
        raw_left -= len(data)
        try:
            out += inflater.feed(data, cap + 1 - len(out))
        except zlib.error:
            raise ValueError(f"the {encoding} body is corrupt; it cannot be decoded") from None
    if len(out) <= cap and not inflater.ended:
        if raw_left <= 0:
            raise ValueError(
                f"the {encoding} body is over {cap * RAW_FACTOR} bytes compressed; web_fetch reads no more"
            )
        raise ValueError(f"the {encoding} body ended before its end marker; the connection was cut")
    return bytes(out)


def _read_plain(resp: Readable, limit: int) -> bytes:
    body = b""
    while len(body) < limit:
        more = resp.read(limit - len(body))
        if not more:
            break
        body += more
    return body


class _Inflater:
    """A gzip (members back to back allowed) or deflate (zlib-wrapped or raw) stream, decoded in pieces."""

    def __init__(self, gzip: bool) -> None:
        self.gzip = gzip
        self.obj: Any = None  # a zlib decompressobj (its class is not public)

    @property
    def ended(self) -> bool:
        """Whether the stream reached its end marker (an empty body counts as ended)."""
        return self.obj is None or self.obj.eof

    def feed(self, data: bytes, room: int) -> bytes:
        """The decoded bytes of ``data``, at most ``room`` of them."""
        if self.obj is None:
            self.obj = zlib.decompressobj(31 if self.gzip else _deflate_bits(data))
        elif self.gzip and self.obj.eof:  # the next member begins in this piece
            data = self.obj.unused_data + data
            self.obj = zlib.decompressobj(31)
        out = self.obj.decompress(data, room)
        while self.gzip and self.obj.eof and self.obj.unused_data and len(out) < room:
            rest = self.obj.unused_data
            self.obj = zlib.decompressobj(31)
            out += self.obj.decompress(rest, room - len(out))
        return out


def _deflate_bits(head: bytes) -> int:
    """HTTP's "deflate" is meant to be zlib-wrapped, but some servers send a raw deflate stream."""
    wrapped = len(head) >= 2 and head[0] & 0x0F == 8 and ((head[0] << 8) | head[1]) % 31 == 0
    return zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS
