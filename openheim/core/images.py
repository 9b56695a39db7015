"""Images from the user: the type told by the file's first bytes, a size cap, and an ImageBlock.

PNG, JPEG, GIF and WebP are what every provider wire accepts; anything else is refused with a line
that says so, as is an image over ``MAX_IMAGE_BYTES`` (providers refuse larger ones anyway).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from openheim.config.bounded_read import NotRegularFile, TooBig, read_bounded, read_head
from openheim.core.models import ImageBlock
from openheim.errors import InvalidArgument

MAX_IMAGE_BYTES = 5 * 1024 * 1024
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def sniff(head: bytes) -> str | None:
    """The image type of data starting with ``head`` (12 bytes are enough), or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def megabytes(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


def image_block(data: bytes, name: str = "image") -> ImageBlock:
    """``data`` as an ImageBlock; InvalidArgument when it is no supported image or too large."""
    mime = sniff(data[:12])
    if mime is None:
        raise InvalidArgument(f"{name} is not a PNG, JPEG, GIF or WebP image; convert it to one of those")
    if len(data) > MAX_IMAGE_BYTES:
        raise InvalidArgument(
            f"{name} is {megabytes(len(data))}, over the {megabytes(MAX_IMAGE_BYTES)} limit "
            "for an image; scale it down and try again"
        )
    return ImageBlock(base64.b64encode(data).decode("ascii"), mime)


def load_image(path: str | Path) -> ImageBlock:
    """The image file at ``path`` (``~`` expanded); InvalidArgument naming it when it cannot be used.

    Read through the bounded reader: a FIFO or device is refused unread, the type is told from the first
    bytes before the rest is read, and no more than the cap + 1 bytes are ever read."""
    p = Path(os.path.expanduser(str(path)))
    name = f"image {path}"

    def header(head: bytes) -> None:
        if sniff(head[:12]) is None:
            raise InvalidArgument(f"{name} is not a PNG, JPEG, GIF or WebP image; convert it to one of those")

    try:
        data = read_bounded(p, MAX_IMAGE_BYTES, header=header)
    except TooBig as e:
        raise InvalidArgument(
            f"{name} is {megabytes(e.size)}, over the {megabytes(MAX_IMAGE_BYTES)} limit; scale it down and try again"
        ) from None
    except NotRegularFile:
        raise InvalidArgument(f"{name} is not a regular file (a FIFO, device or socket); give an image file") from None
    except IsADirectoryError:
        raise InvalidArgument(f"{name} is a directory; give an image file") from None
    except FileNotFoundError:
        raise InvalidArgument(f"{name} does not exist; check the path") from None
    except OSError as e:
        raise InvalidArgument(f"cannot read {name}: {e.strerror or e}") from None
    return image_block(data, name)


def looks_like_image_path(text: str) -> Path | None:
    """A pasted line that is just the path of an existing image file (quotes and ``file://`` removed)."""
    line = text.strip()
    if not line or "\n" in line or len(line) > 4096:
        return None
    if len(line) >= 2 and line[0] == line[-1] and line[0] in "'\"":
        line = line[1:-1]
    line = line.removeprefix("file://").replace("\\ ", " ")
    p = Path(os.path.expanduser(line))
    if not p.is_absolute() and not line.startswith("."):
        return None
    try:
        return p if sniff(read_head(p, 12)) is not None else None
    except OSError:
        return None
