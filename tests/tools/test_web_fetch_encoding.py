"""web_fetch decodes gzip and deflate bodies within its size cap (openheim/tools/fetch_body.py)."""

from __future__ import annotations

import gzip
import io
import zlib

import pytest
from web_fetch_cli import fetch_through_run, page_server

from openheim.tools.fetch_body import RAW_FACTOR, read_decoded
from openheim.tools.web_fetch import MAX_BYTES

TEXT = "the quick brown fox, café\n" * 40
PLAIN = {"Content-Type": "text/plain; charset=utf-8"}


def _raw_deflate(data: bytes) -> bytes:
    obj = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return obj.compress(data) + obj.flush()


def _bomb(size: int) -> bytes:
    """A gzip body of ``size`` zero bytes, written in pieces (it is a few hundred kilobytes)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as f:
        piece = b"z" * (1 << 20)
        for _ in range(size >> 20):
            f.write(piece)
    return out.getvalue()


ROUTES = {
    "/gzip": ({**PLAIN, "Content-Encoding": "gzip"}, gzip.compress(TEXT.encode())),
    "/deflate": ({**PLAIN, "Content-Encoding": "deflate"}, zlib.compress(TEXT.encode())),
    "/raw-deflate": ({**PLAIN, "Content-Encoding": "deflate"}, _raw_deflate(TEXT.encode())),
    "/two-members": ({**PLAIN, "Content-Encoding": "gzip"}, gzip.compress(b"one ") + gzip.compress(b"two")),
    "/html": ({"Content-Type": "text/html", "Content-Encoding": "gzip"}, gzip.compress(b"<p>caf&eacute;</p>")),
    "/br": ({**PLAIN, "Content-Encoding": "br"}, b"\x0b\x02\x80hello\x03"),
    "/corrupt": ({**PLAIN, "Content-Encoding": "gzip"}, b"\x1f\x8b\x08\x00not gzip at all"),
    "/cut": ({**PLAIN, "Content-Encoding": "gzip"}, gzip.compress(TEXT.encode())[:-30]),
}


@pytest.fixture(scope="module")
def site():
    routes = {**ROUTES, "/bomb": ({**PLAIN, "Content-Encoding": "gzip"}, _bomb(256 << 20))}
    with page_server(routes) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("path", ["/gzip", "/deflate", "/raw-deflate"])
def test_compressed_pages_are_decoded_through_run(site, path, isolated_home, tmp_path):
    assert fetch_through_run(isolated_home, tmp_path, site + path) == TEXT


def test_gzip_members_and_html(site, isolated_home, tmp_path):
    assert fetch_through_run(isolated_home, tmp_path, site + "/two-members") == "one two"
    assert fetch_through_run(isolated_home, tmp_path, site + "/html") == "café"


def test_a_gzip_bomb_stops_at_the_cap(site, isolated_home, tmp_path):
    text = fetch_through_run(isolated_home, tmp_path, site + "/bomb")
    # web_fetch gave exactly the cap and its note (the turn then shows the model the first part of that)
    note = f"\n[content truncated at {MAX_BYTES} bytes]\n"
    assert text.startswith("z" * 1000) and text.endswith(f" of {MAX_BYTES + len(note)} bytes]")


@pytest.mark.parametrize(
    "path,why",
    [
        ("/br", "the body is compressed with 'br', which web_fetch cannot decode"),
        ("/corrupt", "the gzip body is corrupt; it cannot be decoded"),
        ("/cut", "the gzip body ended before its end marker"),
    ],
)
def test_bodies_that_cannot_be_decoded_are_one_line_errors(site, path, why, isolated_home, tmp_path):
    text = fetch_through_run(isolated_home, tmp_path, site + path)
    assert why in text and "\n" not in text.strip() and "Traceback" not in text


class Counting(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.taken = 0

    def read(self, amt: int = -1) -> bytes:
        data = super().read(amt)
        self.taken += len(data)
        return data


def test_decoding_reads_no_more_than_it_needs():
    body = Counting(_bomb(64 << 20))
    out = read_decoded(body, "gzip", 1000)
    assert out == b"z" * 1001  # one byte over the cap: the caller knows it was cut
    assert body.taken <= 65536  # one read of compressed bytes, not the whole body


def test_compressed_bytes_that_decode_to_nothing_are_capped():
    empty_blocks = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    data = b"".join(empty_blocks.compress(b"") + empty_blocks.flush(zlib.Z_FULL_FLUSH) for _ in range(200_000))
    with pytest.raises(ValueError, match="compressed; web_fetch reads no more"):
        read_decoded(Counting(data), "deflate", 1000)
    assert len(data) > 1000 * RAW_FACTOR
