"""What a failed or unreadable provider reply says: one line, the provider's own words where it gave any.

Overflow detection, ``Retry-After``, error bodies of every wire's shape, transport failures; never a secret
(every message goes through ``redact``).
"""

from __future__ import annotations

import email.utils
import http.client
import json
import re
import time
from collections.abc import Mapping
from typing import Any

import requests
import urllib3

from openheim.config.secrecy import host_of, redact
from openheim.errors import ApiError, ConfigError, ContextOverflow, HttpError, OpenheimError, TransportError

OVERFLOW_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "reduce the length of the messages",
    "prompt is too long",
    "exceeds the maximum number of tokens",
    "exceeds the available context size",
    "exceeds the context window",
    "exceed context limit",
    "input token count",
    "exceed_context_size_error",
)
HEAD_BYTES = 120  # how much of an unreadable reply a message quotes


def is_overflow(status: int, body: str) -> bool:
    """Whether an error reply means the prompt did not fit the model's context window."""
    if status == 413:
        return True
    low = body.lower()
    if "exceed_context_size_error" in low:  # llama.cpp: trust the body, its status has varied
        return True
    return status == 400 and any(p in low for p in OVERFLOW_PHRASES)


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, ``retry-after`` (seconds) or ``retry-after`` (HTTP date)."""
    ms = _header(headers, "retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(when - (time.time() if now is None else now), 0.0)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value.strip()
    return None


def error_for_status(status: int, body: str, headers: Mapping[str, str], *, overflow: bool = True) -> OpenheimError:
    """The exception for a non-2xx reply: ContextOverflow (when ``overflow`` applies) or an HttpError whose
    message is the provider's own, taken from its error body."""
    if overflow and is_overflow(status, body):
        return ContextOverflow(redact(provider_message(body, status)))
    return HttpError(status, body, parse_retry_after(headers), message=redact(provider_message(body, status)))


def provider_message(body: str, status: int = 0) -> str:
    """The provider's own words in an error body: OpenAI/compatible, Anthropic, Gemini, flat and proxy shapes."""
    text = body.strip()
    if not text:
        return f"{http.client.responses.get(status, 'error')} (empty body)"
    try:
        found = _json_message(json.loads(text))
    except (ValueError, RecursionError):
        found = None
    if found:
        return " ".join(found.split())
    if text[:1] == "<":
        title = re.search(r"<title[^>]*>(.*?)</title>", text[:65536], re.IGNORECASE | re.DOTALL)
        name = " ".join(title.group(1).split()) if title else ""
        return f"an HTML page{': ' + name[:200] if name else ''} instead of an API error"
    flat = " ".join(text.split())
    return flat if len(flat) <= 300 else flat[:299] + "…"


def _json_message(value: Any) -> str | None:
    if isinstance(value, list) and value:
        value = value[0]  # Gemini without alt=sse answers a list
    if not isinstance(value, dict):
        return None
    err = value.get("error", value)
    if isinstance(err, str):
        return err
    if not isinstance(err, dict):
        return None
    message = err.get("message")
    if not isinstance(message, str) or not message.strip():
        message = value.get("message") if isinstance(value.get("message"), str) else value.get("detail")
    if not isinstance(message, str) or not message.strip():
        return None
    kind = err.get("type") or err.get("status") or err.get("code")
    if isinstance(kind, str) and kind not in ("None", "null", "error") and kind.lower() not in message.lower():
        return f"{message} ({kind})"
    return message


def unreadable_reply(url: str, content_type: str, head: bytes, why: str) -> ApiError:
    """The error for a 2xx reply that cannot be parsed: never retried, names the content type and first bytes."""
    shown = " ".join(head[:HEAD_BYTES].decode("utf-8", "replace").split())
    return ApiError(
        f"{host_of(url)} sent a reply openheim cannot read ({why}; content type "
        f"{content_type or 'none'}; it begins {redact(shown)!r}); check api_base and that the server "
        "speaks this provider's API",
        retryable=False,
    )


def describe_transport_error(exc: BaseException, url: str, timeout: float) -> str:
    """A one-line account of a failed connection or read."""
    host = host_of(url)
    text = redact(str(exc))
    if isinstance(exc, requests.ConnectTimeout):
        return f"timed out connecting to {host} after {timeout:g} s; check api_base and the network"
    if isinstance(exc, (requests.ReadTimeout, urllib3.exceptions.ReadTimeoutError)) or "timed out" in text:
        return f"no data from {host} for {timeout:g} s (timeout_secs); the provider stopped responding"
    if "NameResolution" in text or "Name or service not known" in text or "getaddrinfo" in text:
        return f"could not resolve {host}; check api_base and the network"
    if "NewConnectionError" in text or "refused" in text:
        return f"could not connect to {host}: connection refused; check api_base and that the server is up"
    if "InvalidChunkLength" in text:
        return malformed_chunks(url)
    if isinstance(
        exc, (requests.exceptions.ChunkedEncodingError, urllib3.exceptions.ProtocolError, http.client.IncompleteRead)
    ):
        return f"the connection to {host} closed mid-response ({_short(text)}); try again"
    return f"{type(exc).__name__} talking to {host}: {_short(text)}"


def malformed_chunks(url: str) -> str:
    return f"{host_of(url)} sent a malformed chunked reply (an invalid chunk size); check api_base and any proxy"


def request_error(exc: BaseException, url: str, timeout: float) -> OpenheimError:
    """The error for a POST that got no response; never echoes header values (they hold the key)."""
    if isinstance(
        exc, (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema, requests.exceptions.InvalidSchema)
    ):
        return ConfigError(f"api_base gives an invalid URL ({_short(redact(str(exc)))}); fix api_base in the config")
    if isinstance(exc, (requests.exceptions.InvalidHeader, ValueError)):
        return ConfigError("a request header is invalid; check the API key for stray spaces or line breaks")
    return transport_error(exc, url, timeout)


def transport_error(exc: BaseException, url: str, timeout: float) -> TransportError:
    """A failed connection or read as a TransportError; a host name that does not resolve is not retried."""
    text = describe_transport_error(exc, url, timeout)
    return TransportError(text, retryable=not text.startswith("could not resolve "))


def _short(text: str) -> str:
    return text if len(text) <= 300 else text[:300] + "..."
