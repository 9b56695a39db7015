"""``@tool``: a plain Python function as a tool, its JSON schema derived from type hints and docstring."""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union, overload

from openheim.core.tool_args import describe_json
from openheim.core.tools import BaseTool, ToolCapabilities
from openheim.core.turn_context import TurnContext
from openheim.errors import ToolExecutionError

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_PARAM_LINE = re.compile(r"^\s*(?::param\s+)?\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def json_schema(hint: Any) -> dict:
    """The JSON schema of a type hint: scalars, list/tuple/set, dict, Optional/unions, Literal, Enum."""
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum([m.value for m in hint])
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return _enum(list(args))
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        schema = json_schema(members[0]) if len(members) == 1 else {"anyOf": [json_schema(a) for a in members]}
        if len(members) < len(args):  # Optional: null is allowed too
            kind = schema.get("type")
            schema = (
                {**schema, "type": [kind, "null"]} if isinstance(kind, str) else {"anyOf": [schema, {"type": "null"}]}
            )
        return schema
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple, set, frozenset):
        item = args[0] if args else Any
        return {"type": "array", "items": json_schema(item)} if item is not Any else {"type": "array"}
    if origin is dict or hint is dict:
        return {"type": "object"}
    raise TypeError(f"cannot describe {hint!r} as JSON; use str, int, float, bool, list, dict, Literal or Enum")


def _enum(values: list) -> dict:
    """An enum schema, typed when every value has the same JSON type (some providers require it)."""
    kinds = {_SCALARS.get(type(v)) for v in values}
    return {"type": kinds.pop(), "enum": values} if len(kinds) == 1 and None not in kinds else {"enum": values}


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(the description, {parameter: description}) from a Google-style ``Args:`` or Sphinx ``:param:`` docstring."""
    text = inspect.cleandoc(doc or "")
    description: list[str] = []
    params: dict[str, str] = {}
    in_args = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.lower() in ("args:", "arguments:", "parameters:"):
            in_args = True
            continue
        if stripped.lower() in ("returns:", "return:", "raises:", "yields:", "example:", "examples:"):
            in_args = False
            continue
        match = _PARAM_LINE.match(line)
        if (in_args or stripped.startswith(":param")) and match:
            params[match.group(1)] = match.group(2).strip()
        elif in_args and stripped and params:
            last = next(reversed(params))
            params[last] += " " + stripped
        elif not in_args and not stripped.startswith(":"):
            description.append(line)
    return "\n".join(description).strip(), params


def _wants_context(param: inspect.Parameter, hint: Any) -> bool:
    return hint is TurnContext or param.name == "ctx"


class FunctionTool(BaseTool):
    """A ToolHandler around a function: arguments checked against its signature, its result as text."""

    def __init__(
        self,
        func: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
        capabilities: ToolCapabilities | None = None,
    ) -> None:
        self.func = func
        self.name = name or func.__name__
        doc, param_docs = parse_docstring(func.__doc__)
        self.description = description or doc or self.name
        self.capabilities = capabilities or ToolCapabilities()
        hints = typing.get_type_hints(func)
        self._context_param: str | None = None
        self._params: dict[str, Any] = {}
        properties: dict[str, dict] = {}
        required: list[str] = []
        for param in inspect.signature(func).parameters.values():
            hint = hints.get(param.name, param.annotation)
            if _wants_context(param, hint):
                self._context_param = param.name
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.name}: *args and **kwargs cannot be described to the model")
            schema = json_schema(hint)
            if param.name in param_docs:
                schema["description"] = param_docs[param.name]
            if param.default is param.empty:
                required.append(param.name)
            elif param.default is not None:
                schema["default"] = param.default
            properties[param.name] = schema
            self._params[param.name] = hint
        self.parameters = {"type": "object", "properties": properties, "required": required}

    def execute(self, args: dict, ctx: TurnContext) -> str:
        unknown = sorted(set(args) - set(self._params))
        if unknown:
            raise ToolExecutionError(
                f"failed to parse arguments: unknown field `{unknown[0]}`; "
                f"expected one of: {', '.join(self._params) or '(none)'}"
            )
        missing = [n for n in self.parameters["required"] if n not in args]
        if missing:
            raise ToolExecutionError(f"failed to parse arguments: missing field `{missing[0]}`")
        kwargs = {name: _coerce(name, value, self._params[name]) for name, value in args.items()}
        if self._context_param is not None:
            kwargs[self._context_param] = ctx
        return _as_text(self.func(**kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The decorated function still works as a function."""
        return self.func(*args, **kwargs)


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """Check a JSON value against a scalar hint (ints accepted for floats; Enum values converted)."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None and len(members) < len(typing.get_args(hint)):
            return None
        return _coerce(name, value, members[0]) if len(members) == 1 else value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise _bad(name, value, f"one of {[m.value for m in hint]}") from None
    if hint in _SCALARS:
        if hint is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if hint is int and isinstance(value, float) and value.is_integer():
            return int(value)
        if not isinstance(value, hint) or (hint is not bool and isinstance(value, bool)):
            raise _bad(name, value, f"a {_SCALARS[hint]}")
    return value


def _bad(name: str, value: Any, expected: str) -> ToolExecutionError:
    return ToolExecutionError(
        f"failed to parse arguments: invalid type: {describe_json(value)}, expected {expected} (field `{name}`)"
    )


def _as_text(result: Any) -> str:
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


@overload
def tool(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    kind: str = "other",
) -> FunctionTool: ...


@overload
def tool(
    func: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    kind: str = "other",
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    kind: str = "other",
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a function a tool: ``@tool`` or ``@tool(read_only=True, kind="read")``.

    The JSON schema comes from the type hints, the description from the docstring (its ``Args:``
    section describes each parameter). A parameter named ``ctx`` (or typed TurnContext) receives the
    turn's context: cancel token, sandbox root, cwd.
    """
    caps = ToolCapabilities(read_only=read_only, kind=kind)

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(f, name, description, caps)

    return wrap(func) if func is not None else wrap
