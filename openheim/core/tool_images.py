"""Images a tool result carries to the model: the result text that holds them, and the check each one passes.

A tool's ``execute`` returns text; a tool whose result has images returns a ``ResultText`` (a ``str``, so every
executor passes it through unchanged) and the tool-call runner moves its images into the tool-result block.
Each image is held to the limits of images from the user (``core.images``); one that fails becomes a note in
the text instead, and the note of one that passes says it is attached.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

from openheim.core.images import MAX_IMAGE_BYTES, megabytes, sniff
from openheim.core.models import ImageBlock

UNSUPPORTED = "not a PNG, JPEG, GIF or WebP image"


class ResultText(str):
    """A tool's result text with ``images`` attached."""

    images: tuple[ImageBlock, ...]

    def __new__(cls, text: str, images: Sequence[ImageBlock] = ()) -> ResultText:
        self = super().__new__(cls, text)
        self.images = tuple(images)
        return self


def split_result(result: str) -> tuple[str, list[ImageBlock]]:
    """A tool's result as its plain text and the images it carries (none for plain text)."""
    if isinstance(result, ResultText):
        return str(result), list(result.images)
    return result, []


def checked_image(data: object) -> ImageBlock | str:
    """Base64 ``data`` a tool returned as an image: an ImageBlock typed by its bytes, or why it is not sent."""
    if not isinstance(data, str) or not data.strip():
        return "no image data"
    data = "".join(data.split())  # line breaks in base64 are tolerated here, not by every provider
    size = len(data) // 4 * 3 - (len(data) - len(data.rstrip("=")))  # what valid base64 decodes to
    if size > MAX_IMAGE_BYTES:  # refused before decoding it
        return f"{megabytes(size)}, over the {megabytes(MAX_IMAGE_BYTES)} limit"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "the data is not valid base64"
    sniffed = sniff(raw[:12])
    if sniffed is None:
        return UNSUPPORTED
    return ImageBlock(data, sniffed)


def image_note(mime_type: str, verdict: ImageBlock | str) -> str:
    """The text the model reads in place of an image: attached, or not sent and why."""
    if isinstance(verdict, ImageBlock):
        return f"[image: {verdict.mime_type}, attached]"
    return f"[image: {mime_type}, not sent: {verdict}]"
