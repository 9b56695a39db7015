"""Reduce a JSON Schema to the OpenAPI subset Gemini's functionDeclarations.parameters accepts."""

from __future__ import annotations

from typing import Any

_KEEP = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    }
)
_FORMATS = {"string": {"enum", "date-time"}, "integer": {"int32", "int64"}, "number": {"float", "double"}}
_MAX_DEPTH = 32


def gemini_schema(schema: Any) -> dict[str, Any] | None:
    """The cleaned ``parameters`` schema, or None when the tool takes no parameters."""
    if not isinstance(schema, dict):
        return None
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    cleaned = _clean(schema, defs, 0)
    if cleaned.get("type") == "object" and not cleaned.get("properties"):
        return None
    return cleaned


def gemini_response_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """An output JSON Schema as ``generationConfig.responseSchema`` (the same subset; never empty)."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return _clean(schema, defs, 0)


def _resolve(node: dict[str, Any], defs: dict[str, Any], depth: int) -> dict[str, Any]:
    """Inline a local ``$ref`` (``#/$defs/X`` or ``#/definitions/X``); unknown refs become plain objects."""
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return node
    target = defs.get(ref.rsplit("/", 1)[-1]) if ref.startswith("#/") else None
    if not isinstance(target, dict) or depth > _MAX_DEPTH:
        return {k: v for k, v in node.items() if k != "$ref"} or {"type": "object"}
    merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return _resolve(merged, defs, depth + 1)


def _clean(node: Any, defs: dict[str, Any], depth: int) -> dict[str, Any]:
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return {"type": "string"}
    node = _resolve(node, defs, depth)
    node = _merge_all_of(node, defs, depth)
    union = node.get("anyOf") or node.get("oneOf")
    if isinstance(union, list) and union:
        return _union(node, union, defs, depth)
    out: dict[str, Any] = {k: v for k, v in node.items() if k in _KEEP}
    _fix_type(node, out)
    if "const" in node and isinstance(node["const"], str):
        out["enum"] = [node["const"]]
    if "enum" in out and not all(isinstance(v, str) for v in out["enum"]):
        del out["enum"]
    if "format" in out and out["format"] not in _FORMATS.get(out.get("type", ""), ()):
        del out["format"]
    if isinstance(node.get("properties"), dict):
        out["properties"] = {k: _clean(v, defs, depth + 1) for k, v in node["properties"].items()}
        required = [r for r in node.get("required") or [] if r in out["properties"]]
        out.pop("required", None)
        if required:
            out["required"] = required
    else:
        out.pop("properties", None)
        out.pop("required", None)
    if "items" in node:
        items = node["items"][0] if isinstance(node["items"], list) and node["items"] else node["items"]
        out["items"] = _clean(items, defs, depth + 1)
    elif out.get("type") == "array":
        out["items"] = {"type": "string"}
    return out


def _fix_type(node: dict[str, Any], out: dict[str, Any]) -> None:
    """``type: [x, "null"]`` becomes ``type: x, nullable: true``; a missing type is inferred."""
    t = node.get("type")
    if isinstance(t, list):
        kinds = [k for k in t if k != "null"]
        if len(kinds) < len(t):
            out["nullable"] = True
        t = kinds[0] if kinds else "string"
    if not isinstance(t, str):
        stringy = "enum" in node or isinstance(node.get("const"), str)
        t = "object" if "properties" in node else "array" if "items" in node else "string" if stringy else None
    if t:
        out["type"] = t
    else:
        out.pop("type", None)


def _merge_all_of(node: dict[str, Any], defs: dict[str, Any], depth: int) -> dict[str, Any]:
    parts = node.get("allOf")
    if not isinstance(parts, list):
        return node
    merged = {k: v for k, v in node.items() if k != "allOf"}
    props: dict[str, Any] = dict(merged.get("properties") or {})
    required: list[str] = list(merged.get("required") or [])
    for part in parts:
        part = _resolve(part, defs, depth) if isinstance(part, dict) else {}
        props.update(part.get("properties") or {})
        required += [r for r in part.get("required") or [] if r not in required]
        for k, v in part.items():
            merged.setdefault(k, v)
    if props:
        merged["properties"], merged["type"] = props, "object"
    if required:
        merged["required"] = required
    return merged


def _union(node: dict[str, Any], union: list[Any], defs: dict[str, Any], depth: int) -> dict[str, Any]:
    """``anyOf``/``oneOf``: a nullable single option collapses; otherwise anyOf is the node's only key."""
    options = [o for o in union if not (isinstance(o, dict) and o.get("type") == "null")]
    if len(options) == 1:
        out = _clean(options[0], defs, depth + 1)
        if len(options) < len(union):
            out["nullable"] = True
        if "description" in node and "description" not in out:
            out["description"] = node["description"]
        return out
    return {"anyOf": [_clean(o, defs, depth + 1) for o in options]}
