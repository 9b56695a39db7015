"""Structured output: the JSON Schema a turn's final answer must match, how it is asked for, how it is checked."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openheim.config.bounded_read import read_bounded
from openheim.core.json_check import SchemaError, check_schema, validate
from openheim.errors import InvalidArgument

# OpenAI's strict mode refuses schemas using these (and needs every object closed and fully required)
MAX_SCHEMA_BYTES = 1 << 20
_NOT_STRICT = frozenset({"allOf", "oneOf", "not", "uniqueItems", "minProperties", "maxProperties"})
_FENCED = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


@dataclass(frozen=True)
class OutputSchema:
    """A checked JSON Schema for the final answer; ``name`` is what native modes call it."""

    schema: dict
    name: str = "output"

    @classmethod
    def from_dict(cls, schema: Any, name: str = "output") -> OutputSchema:
        """Raises InvalidArgument (one line) when ``schema`` is not a schema openheim can validate against."""
        if not isinstance(schema, dict):
            raise InvalidArgument("the output schema must be a JSON object (a JSON Schema)")
        try:
            check_schema(schema)
        except SchemaError as e:
            raise InvalidArgument(f"the output schema is not usable: {e}") from None
        return cls(schema, re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "output")

    @property
    def strict(self) -> bool:
        """Whether OpenAI's strict mode accepts the schema as it is (else it is sent with strict false)."""
        return strict_compatible(self.schema)

    def instructions(self) -> str:
        """What the system prompt says on wires with no native structured-output mode."""
        return (
            "When you give your final answer, reply with only a JSON value that is valid against the "
            "following JSON Schema: no prose, no Markdown code fence. Use tools first if you need them.\n"
            f"JSON Schema:\n{json.dumps(self.schema, ensure_ascii=False)}"
        )

    def check(self, text: str) -> tuple[Any, str | None]:
        """(the parsed answer, None), or (None, a one-line reason it is not valid)."""
        stripped = text.strip()
        fenced = _FENCED.match(stripped)
        if fenced:
            stripped = fenced.group(1).strip()
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as e:
            return None, f"the answer is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
        error = validate(value, self.schema)
        if error:
            return None, f"the answer does not match the output schema: {' '.join(error.split())}"
        return value, None

    @staticmethod
    def repair_prompt(error: str) -> str:
        """The follow-up user message of the one repair round."""
        return (
            f"Your answer was rejected: {error}. Reply again with only the corrected JSON, valid against the "
            "output schema, and nothing else."
        )


def load_output_schema(path: str | Path) -> OutputSchema:
    """The schema of an --output-schema file; InvalidArgument (one line) when unreadable or not a usable schema."""
    p = Path(path)
    try:
        text = read_bounded(p, MAX_SCHEMA_BYTES).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise InvalidArgument(
            f"cannot read the output schema {p}: {reason}; pass a readable JSON Schema file"
        ) from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidArgument(
            f"the output schema {p} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); fix the file"
        ) from None
    try:
        return OutputSchema.from_dict(schema, p.stem)
    except InvalidArgument as e:
        raise InvalidArgument(f"{p}: {e}; fix the file") from None


def strict_compatible(schema: Any, root: bool = True) -> bool:
    """OpenAI strict mode: an object at the root, every object closed (additionalProperties false) with every
    property required, and no keyword it does not support."""
    if not isinstance(schema, dict):
        return False
    if root and schema.get("type") != "object":
        return False
    if _NOT_STRICT & schema.keys():
        return False
    props = schema.get("properties")
    if schema.get("type") == "object" or props is not None:
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required", [])) != set(props or {}):
            return False
    subs = [
        *(props or {}).values(),
        *(schema.get("$defs") or {}).values(),
        *(schema.get("definitions") or {}).values(),
        *schema.get("anyOf", []),
    ]
    if isinstance(schema.get("items"), dict):
        subs.append(schema["items"])
    return all(strict_compatible(s, root=False) for s in subs)
