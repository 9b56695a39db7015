"""A small JSON Schema validator for the subset `--output-schema` supports (no dependency).

Supported: type, enum, const, properties, required, additionalProperties, items, minItems, maxItems,
uniqueItems, minProperties, maxProperties, minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf,
minLength, maxLength, pattern, anyOf, oneOf, allOf, not, and local ``$ref`` (``#``, ``#/$defs/X``,
``#/definitions/X``). Annotations (title, description, format, default, ...) are accepted and not checked.
Any other keyword is refused when the schema is checked, so nothing is silently left unvalidated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "format",
        "readOnly",
        "writeOnly",
        "deprecated",
        "propertyOrdering",
        "$defs",
        "definitions",
    }
)
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf")
_SCHEMAS = ("items", "not", "additionalProperties")
_COUNTS = ("minItems", "maxItems", "minProperties", "maxProperties", "minLength", "maxLength")
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_KNOWN = frozenset(
    {
        *_ANNOTATIONS,
        *_SCHEMA_MAPS,
        *_SCHEMA_LISTS,
        *_SCHEMAS,
        *_COUNTS,
        *_NUMBERS,
        "type",
        "enum",
        "const",
        "required",
        "uniqueItems",
        "pattern",
        "$ref",
    }
)
MAX_DEPTH = 64


class SchemaError(ValueError):
    """The schema itself is not one this validator can apply."""


def check_schema(schema: Any, where: str = "#") -> None:
    """Raise SchemaError naming the first problem: a malformed keyword, or one outside the subset."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}: a schema must be an object or a boolean")
    for key, value in schema.items():
        at = f"{where}/{key}"
        if key not in _KNOWN:
            raise SchemaError(f"{at}: the keyword '{key}' is not supported (supported: {', '.join(sorted(_KNOWN))})")
        if key == "type":
            kinds = value if isinstance(value, list) else [value]
            if not kinds or any(k not in _TYPES for k in kinds):
                raise SchemaError(f"{at}: must be one of {', '.join(_TYPES)} (or a list of them)")
        elif key in _SCHEMA_MAPS:
            if not isinstance(value, dict):
                raise SchemaError(f"{at}: must be an object of schemas")
            for name, sub in value.items():
                check_schema(sub, f"{at}/{name}")
        elif key in _SCHEMA_LISTS:
            if not isinstance(value, list) or not value:
                raise SchemaError(f"{at}: must be a non-empty list of schemas")
            for i, sub in enumerate(value):
                check_schema(sub, f"{at}/{i}")
        elif key in _SCHEMAS:
            check_schema(value, at)
        elif key in _COUNTS and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise SchemaError(f"{at}: must be a non-negative integer")
        elif key in _NUMBERS and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise SchemaError(f"{at}: must be a number")
        elif key == "required" and (not isinstance(value, list) or not all(isinstance(r, str) for r in value)):
            raise SchemaError(f"{at}: must be a list of property names")
        elif key == "enum" and not isinstance(value, list):
            raise SchemaError(f"{at}: must be a list")
        elif key == "pattern":
            _check_pattern(value, at)
        elif key == "$ref" and not (isinstance(value, str) and (value == "#" or value.startswith("#/"))):
            raise SchemaError(f"{at}: only local references (#/$defs/NAME) are supported")


def _check_pattern(value: Any, at: str) -> None:
    if not isinstance(value, str):
        raise SchemaError(f"{at}: must be a string")
    try:
        re.compile(value)
    except re.error as e:
        raise SchemaError(f"{at}: not a valid regular expression ({e})") from None


def validate(instance: Any, schema: Any) -> str | None:
    """The first way ``instance`` fails ``schema`` (e.g. "at $.items[0]: expected string, got integer"), or None."""
    return _Validator(schema).check(instance, schema, "$", 0)


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _is_type(value: Any, kind: str) -> bool:
    actual = type_name(value)
    if kind == "number":
        return actual in ("integer", "number")
    if kind == "integer":
        return actual == "integer" or (actual == "number" and float(value).is_integer())
    return actual == kind


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a == b


class _Validator:
    def __init__(self, root: Any) -> None:
        self.root = root

    def check(self, value: Any, schema: Any, path: str, depth: int) -> str | None:
        if schema is True or schema == {}:
            return None
        if schema is False:
            return f"at {path}: no value is allowed here"
        if depth > MAX_DEPTH:
            return f"at {path}: the schema nests too deeply (a $ref cycle?)"
        if "$ref" in schema:
            error = self.check(value, self._resolve(schema["$ref"]), path, depth + 1)
            if error:
                return error
        for step in (
            self._type,
            self._values,
            self._number,
            self._string,
            self._array,
            self._object,
            self._combinators,
        ):
            error = step(value, schema, path, depth)
            if error:
                return error
        return None

    def _resolve(self, ref: str) -> Any:
        node = self.root
        for part in ref.removeprefix("#").strip("/").split("/") if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or part not in node:
                return True  # checked schemas only hold local refs; a dangling one constrains nothing
            node = node[part]
        return node

    def _type(self, value: Any, schema: dict, path: str, depth: int) -> str | None:
        kinds = schema.get("type")
        if kinds is None:
            return None
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if any(_is_type(value, k) for k in kinds):
            return None
        return f"at {path}: expected {' or '.join(kinds)}, got {type_name(value)}"

    def _values(self, value: Any, schema: dict, path: str, depth: int) -> str | None:
        if "const" in schema and not _equal(value, schema["const"]):
            return f"at {path}: must be {_short(schema['const'])}"
        if "enum" in schema and not any(_equal(value, v) for v in schema["enum"]):
            return f"at {path}: must be one of {_short(schema['enum'])}, got {_short(value)}"
        return None

    def _number(self, value: Any, schema: dict, path: str, depth: int) -> str | None:
        if type_name(value) not in ("integer", "number"):
            return None
        checks: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
            ("minimum", lambda lim: value >= lim, "at least"),
            ("maximum", lambda lim: value <= lim, "at most"),
            ("exclusiveMinimum", lambda lim: value > lim, "more than"),
            ("exclusiveMaximum", lambda lim: value < lim, "less than"),
        )
        for key, ok, words in checks:
            if key in schema and not ok(schema[key]):
                return f"at {path}: must be {words} {schema[key]}, got {value}"
        step = schema.get("multipleOf")
        if step and not math.isclose(value / step, round(value / step)):
            return f"at {path}: must be a multiple of {step}, got {value}"
        return None

    def _string(self, value: Any, schema: dict, path: str, depth: int) -> str | None:
        if not isinstance(value, str):
            return None
        if "minLength" in schema and len(value) < schema["minLength"]:
            return f"at {path}: must have at least {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"at {path}: must have at most {schema['maxLength']} characters"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"at {path}: must match the pattern {schema['pattern']!r}, got {_short(value)}"
        return None

    def _array(self, value: Any, schema: dict, path: str, depth: int) -> str | None:
        if not isinstance(value, list):
            return None
        if "minItems" in schema and len(value) < schema["minItems"]:
            return f"at {path}: must have at least {schema['minItems']} items, got {len(value)}"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"at {path}: must have at most {schema['maxItems']} items, got {len(value)}"
        if schema.get("uniqueItems"):
            for i, item in enumerate(value):
                if any(_equal(item, other) for other in value[:i]):
                    return f"at {path}[{i}]: repeats an earlier item; items must be unique"
        if "items" in schema:
            for i, item in enumerate(value):
                error = self.check(item, schema["items"], f"{path}[{i}]", depth + 1)
                if error:
                    return error
        return None

    def _object(self, value: Any, schema: dict, path: str, depth: int) -> str | None:
        if not isinstance(value, dict):
            return None
        missing = [name for name in schema.get("required", []) if name not in value]
        if missing:
            return f"at {path}: missing required property '{missing[0]}'"
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            return f"at {path}: must have at least {schema['minProperties']} properties"
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            return f"at {path}: must have at most {schema['maxProperties']} properties"
        properties = schema.get("properties", {})
        for name, item in value.items():
            sub = properties.get(name, schema.get("additionalProperties", True))
            if sub is False and name not in properties:
                return f"at {path}: property '{name}' is not allowed"
            error = self.check(item, sub, f"{path}.{name}", depth + 1)
            if error:
                return error
        return None

    def _combinators(self, value: Any, schema: dict, path: str, depth: int) -> str | None:
        for sub in schema.get("allOf", []):
            error = self.check(value, sub, path, depth + 1)
            if error:
                return error
        if "anyOf" in schema:
            errors = [self.check(value, sub, path, depth + 1) for sub in schema["anyOf"]]
            if all(errors):
                return f"{errors[0]} (and no other anyOf option matches)" if len(errors) > 1 else errors[0]
        if "oneOf" in schema:
            matches = sum(1 for sub in schema["oneOf"] if self.check(value, sub, path, depth + 1) is None)
            if matches != 1:
                return f"at {path}: must match exactly one oneOf option, matches {matches}"
        if "not" in schema and self.check(value, schema["not"], path, depth + 1) is None:
            return f"at {path}: must not match the 'not' schema"
        return None


def _short(value: Any, limit: int = 80) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
