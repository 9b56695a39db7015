"""Typed decoding of a tool's JSON arguments, with serde-like messages the model can act on."""

from __future__ import annotations

import json

from openheim.errors import ParseError, ToolExecutionError

_PREFIX = "failed to parse arguments: "


def describe_json(value: object) -> str:
    """The JSON value as serde names it in an 'invalid type' message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f"string {json.dumps(value)}"
    if isinstance(value, list):
        return "sequence"
    return "map"


def _invalid_type(name: str, value: object, expected: str) -> ParseError:
    return ParseError(f"{_PREFIX}invalid type: {describe_json(value)}, expected {expected} (field `{name}`)")


def _missing(name: str) -> ParseError:
    return ParseError(f"{_PREFIX}missing field `{name}`")


def require_text(args: dict, name: str) -> str:
    """A required string that may be empty (file content, replacement text)."""
    if name not in args:
        raise _missing(name)
    value = args[name]
    if not isinstance(value, str):
        raise _invalid_type(name, value, "a string")
    return value


def require_str(args: dict, name: str, strip: bool = False) -> str:
    """A required string that must not be blank (``strip``: returned without surrounding whitespace)."""
    value = require_text(args, name)
    if not value.strip():
        raise ParseError(f"{_PREFIX}expected non-empty text, got an empty string (field `{name}`)")
    return value.strip() if strip else value


def optional_str(args: dict, name: str) -> str | None:
    """An optional string; absent or null means unset, blank means unset too."""
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid_type(name, value, "a string")
    return value if value.strip() else None


def optional_int(args: dict, name: str, minimum: int | None = None, digits: bool = False) -> int | None:
    """An optional integer (null = unset); integral floats such as 3.0 are accepted, and with
    ``digits`` also strings of digits such as "3"."""
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif digits and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid_type(name, value, "an integer")
    if minimum is not None and value < minimum:
        raise ParseError(
            f"{_PREFIX}invalid value: integer `{value}`, expected an integer of at least {minimum} (field `{name}`)"
        )
    return value


def require_int(args: dict, name: str, digits: bool = False) -> int:
    """A required integer (see optional_int)."""
    value = optional_int(args, name, digits=digits)
    if value is None:
        raise _missing(name)
    return value


def optional_bool(args: dict, name: str, default: bool = False) -> bool:
    """An optional boolean (null = default)."""
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _invalid_type(name, value, "a boolean")
    return value


def decode_arguments(arguments: str) -> dict:
    """Arguments text to a dict: blank means no arguments; anything but a JSON object is a ToolExecutionError."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError) as e:
        raise ToolExecutionError(f"failed to parse arguments: {e}") from None
    if not isinstance(value, dict):
        raise ToolExecutionError("failed to parse arguments: expected a JSON object")
    return value


def parse_arguments(arguments: str) -> dict | None:
    """The call's arguments as a dict, or None when they are not a JSON object (for display)."""
    try:
        return decode_arguments(arguments)
    except ToolExecutionError:
        return None
