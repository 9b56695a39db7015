"""Small images and where each wire puts them in a request body: shared by the prompt-image tests."""

from __future__ import annotations

import base64

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
GIF = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"
PNG_B64 = base64.b64encode(PNG).decode()
GIF_B64 = base64.b64encode(GIF).decode()


def images_in(body: dict, kind: str) -> list[tuple[str, str]]:
    """(mime type, base64 data) of every image in a request body, in each wire's own shape."""
    found = []
    if kind == "gemini":
        for content in body["contents"]:
            for part in content["parts"]:
                if "inlineData" in part:
                    found.append((part["inlineData"]["mimeType"], part["inlineData"]["data"]))
        return found
    for message in body["messages"]:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "image_url":
                mime, data = block["image_url"]["url"].removeprefix("data:").split(";base64,")
                found.append((mime, data))
            elif block.get("type") == "image":
                found.append((block["source"]["media_type"], block["source"]["data"]))
    return found
