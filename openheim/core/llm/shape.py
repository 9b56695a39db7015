"""What provider payloads look like, as plain data, and a checker that says where a payload differs.

The parsers do not run the checker on every payload (that would cost every streamed chunk); it runs
once a parser failed on a payload, to turn a TypeError into "choices[0] is a number, not an object".
A schema is a dict (an object whose listed keys, when present and not null, fit their schemas), a
one-item list (a list whose items all fit), a type or tuple of types, or ANY.
"""

from __future__ import annotations

from typing import Any

ANY: Any = object()
NUMBER = (int, float)

_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "true or false",
    int: "a number",
    float: "a number",
    type(None): "null",
}


def mismatch(value: Any, schema: Any, path: str = "") -> str | None:
    """The first place where ``value`` does not fit ``schema``, said in words; None when it fits."""
    if schema is ANY:
        return None
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return _wrong(path, value, "an object")
        for key, sub in schema.items():
            item = value.get(key)
            if item is not None:
                found = mismatch(item, sub, f"{path}.{key}" if path else key)
                if found:
                    return found
        return None
    if isinstance(schema, list):
        if not isinstance(value, list):
            return _wrong(path, value, "a list")
        for i, item in enumerate(value):
            found = mismatch(item, schema[0], f"{path}[{i}]")
            if found:
                return found
        return None
    return None if isinstance(value, schema) else _wrong(path, value, _expected(schema))


def _expected(schema: type | tuple[type, ...]) -> str:
    types = schema if isinstance(schema, tuple) else (schema,)
    return " or ".join(dict.fromkeys(_NAMES.get(t, t.__name__) for t in types))


def _wrong(path: str, value: Any, expected: str) -> str:
    got = _NAMES.get(type(value), type(value).__name__)
    return f"{path or 'the reply'} is {got}, not {expected}"
