"""Secrecy rules: what of the config may appear in output, logs and views.

Secrets are API keys and whatever an ``api_base`` URL carries besides scheme, host, port and path (a
user name and password, query values such as ``?key=...``). Every message and log line passes through
``redact``, which removes the secret values this process has been told about (``remember_secrets``)
and, in any URL-like text, user info and query values.
"""

from __future__ import annotations

import logging
import re
import threading
from urllib.parse import parse_qsl, urlsplit, urlunsplit

REDACTED = "<redacted>"
MIN_SECRET_LENGTH = 4  # shorter values would redact ordinary words; URL patterns still cover them
_USERINFO = r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]+@"  # patterns compile on first use (re caches them)
_QUERY_VALUE = r"([?&][^\s=&#?'\"]+=)[^\s&#'\"]+"
_known: set[str] = set()
_known_lock = threading.Lock()
_pattern: re.Pattern[str] | None = None


def scrub_url(url: str) -> str:
    """Drop userinfo, query and fragment; an unparseable URL becomes ``<redacted>``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if not parts.scheme or not host:
            return REDACTED
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return REDACTED
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def shown_url(url: str) -> str:
    """``url`` as a message may show it: scrubbed, or (when it does not parse) cut at ``?``, ``#`` and ``@``."""
    scrubbed = scrub_url(url)
    if scrubbed != REDACTED:
        return scrubbed
    text = url.split("?", 1)[0].split("#", 1)[0]
    return text.rsplit("@", 1)[-1]


def host_of(url: str) -> str:
    """``host[:port]`` of ``url``, never its user info; the scrubbed URL when it has no host."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return shown_url(url)
    if not host:
        return shown_url(url)
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port else host


def url_secrets(url: str) -> list[str]:
    """The secret parts of a URL: password, user info, query string, long query values, fragment.

    A user name alone and short query values (``alt=sse``) are not secrets; redacting them would garble
    ordinary words, and in URL form ``redact`` removes them anyway.
    """
    try:
        parts = urlsplit(url)
        found = [parts.password, parts.query, parts.fragment]
    except ValueError:
        return [url]
    if "@" in parts.netloc:
        found.append(parts.netloc.rsplit("@", 1)[0])
    found += [value for _, value in parse_qsl(parts.query, keep_blank_values=True) if len(value) >= 8]
    return [s for s in found if s]


def remember_secrets(*values: str) -> None:
    """Add secret values (API keys, URL secrets) that ``redact`` must remove from every message."""
    global _pattern
    fresh = {v for v in values if v and len(v) >= MIN_SECRET_LENGTH and v not in _known}
    if not fresh:
        return
    with _known_lock:
        _known.update(fresh)
        ordered = sorted(_known, key=len, reverse=True)  # longest first: a key containing another
        _pattern = re.compile("|".join(re.escape(v) for v in ordered))


def remove_secrets(text: str) -> str:
    """``text`` without remembered secrets, and nothing else changed (for bodies kept byte for byte)."""
    pattern = _pattern
    return pattern.sub(REDACTED, text) if pattern is not None else text


def redact(text: str) -> str:
    """``text`` without remembered secrets, URL user info or URL query values."""
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    if "@" in text:
        text = re.sub(_USERINFO, r"\1", text)
    if "=" in text:
        text = re.sub(_QUERY_VALUE, r"\1" + REDACTED, text)
    return text


class RedactingFilter(logging.Filter):
    """A handler filter: every record's text (and traceback) is passed through ``redact``."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
