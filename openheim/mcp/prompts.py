"""MCP prompts as commands a person runs: their names, the ``name=value`` arguments they take, and the text a
prompts/get result becomes (sent as the user's message). Pure functions; the request itself is the server's."""

from __future__ import annotations

import re
from dataclasses import dataclass

from openheim.errors import InvalidArgument
from openheim.mcp.content import block_text

DESCRIPTION_CHARS = 200


@dataclass(frozen=True)
class PromptArgument:
    name: str
    description: str = ""
    required: bool = False


@dataclass(frozen=True)
class McpPrompt:
    """One prompt of one server, as prompts/list describes it."""

    server: str
    name: str
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()

    @property
    def ref(self) -> str:
        """How the chat names it: ``server/name``."""
        return f"{self.server}/{self.name}"

    @property
    def command(self) -> str:
        """Its ACP slash command: ``server.name``, other characters than letters, digits, ``_.:-`` made ``_``
        (editors read a command up to a space and break it at a '/')."""
        return re.sub(r"[^\w.:-]+", "_", f"{self.server}.{self.name}")

    def usage(self) -> str:
        """Its arguments as typed: ``code=… [language=…]``."""
        return " ".join(f"{a.name}=…" if a.required else f"[{a.name}=…]" for a in self.arguments)

    def summary(self) -> str:
        """``server/name — description (arguments)`` for a listing."""
        described = f" — {self.description}" if self.description else ""
        args = f" ({self.usage()})" if self.arguments else ""
        return f"{self.ref}{described}{args}"


def prompts_of(server: str, specs: list[dict]) -> list[McpPrompt]:
    """A server's prompts/list entries (wire JSON) as prompts; entries without a name are left out."""
    found = []
    for spec in specs:
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            continue
        args = tuple(
            PromptArgument(str(a["name"]), str(a.get("description") or ""), a.get("required") is True)
            for a in spec.get("arguments") or []
            if isinstance(a, dict) and a.get("name")
        )
        described = " ".join(str(spec.get("description") or spec.get("title") or "").split())
        found.append(McpPrompt(server, name, _clip(described, DESCRIPTION_CHARS), args))
    return found


def find(prompts: list[McpPrompt], name: str) -> McpPrompt | None:
    """The prompt named ``server/name`` (the chat) or ``server.name`` (its slash command)."""
    return next((p for p in prompts if name in (p.ref, p.command)), None)


def parse_arguments(prompt: McpPrompt, text: str) -> dict[str, str]:
    """``name=value`` pairs for the prompt's declared arguments. A value runs to the next ``name=`` of a declared
    argument (so it may hold spaces), and one pair of quotes around it is dropped. InvalidArgument, in one line,
    for text that is not a ``name=`` pair or a missing required argument."""
    declared = [a.name for a in prompt.arguments]
    values: dict[str, str] = {}
    text = text.strip()
    if declared:
        keys = "|".join(re.escape(n) for n in sorted(declared, key=len, reverse=True))
        marks = list(re.finditer(rf"(?:^|(?<=\s))({keys})=", text))
        head = text[: marks[0].start()] if marks else text
        ends = [m.start() for m in marks[1:]] + ([len(text)] if marks else [])
        for mark, end in zip(marks, ends, strict=True):
            values[mark.group(1)] = _unquote(text[mark.end() : end].strip())
    else:
        head = text
    if head.strip():
        hint = f"give arguments as name=value: {prompt.usage()}" if declared else "it takes no arguments"
        raise InvalidArgument(f"prompt {prompt.ref}: unexpected '{_clip(head.strip())}'; {hint}")
    missing = [a.name for a in prompt.arguments if a.required and not values.get(a.name)]
    if missing:
        raise InvalidArgument(f"prompt {prompt.ref} needs {', '.join(missing)}; its arguments: {prompt.usage()}")
    return values


def prompt_text(result: dict) -> str:
    """A prompts/get result (wire JSON) as the text of one user message: each message's content (embedded
    resources as their text, other media as a bracketed note), separated by blank lines."""
    parts = []
    for message in result.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        text = "\n".join(block_text(b) for b in blocks if isinstance(b, dict))
        if text.strip():
            parts.append(text)
    return "\n\n".join(parts)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _clip(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


async def get_prompt(session: object, name: str, arguments: dict[str, str]) -> dict:
    """prompts/get on a ``ClientSession``, as wire JSON."""
    result = await session.get_prompt(name, arguments or None)  # type: ignore[attr-defined]
    return dict(result.model_dump(by_alias=True, mode="json", exclude_none=True))
