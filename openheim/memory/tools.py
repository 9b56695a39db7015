"""The memory tools the model calls: remember, search_memory, edit_memory, forget."""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING

from openheim.core.tool_args import optional_int, require_int, require_str
from openheim.core.tools import BaseTool, ToolCapabilities
from openheim.errors import OpenheimError, ParseError, ToolExecutionError

if TYPE_CHECKING:
    from openheim.core.tools import ToolHandler
    from openheim.core.turn_context import TurnContext
    from openheim.memory.long_term import LongTermMemory
    from openheim.memory.store import Hit

MAX_NOTE_CHARS = 4000
MAX_TOP_K = 20
EMPTY_STORE = "Long-term memory is empty; nothing has been remembered yet."
NO_HITS = "No relevant memories found."

_ID = {"type": "integer", "description": "The memory's id, as shown by search_memory (e.g. 3 for [#3])."}
_CONTENT = {"type": "string", "description": f"The note: one self-contained fact, at most {MAX_NOTE_CHARS} characters."}


def note_arg(args: dict, key: str = "content") -> str:
    """A note's text: trimmed, non-empty, at most 4,000 characters."""
    value = require_str(args, key, strip=True)
    if len(value) > MAX_NOTE_CHARS:
        raise ToolExecutionError(f"note is longer than {MAX_NOTE_CHARS} characters; split it into smaller notes")
    return value


def clamp_top_k(value: int | None, default: int) -> int:
    """top_k within 1..20; the configured default when unset."""
    return max(1, min(MAX_TOP_K, default if value is None else value))


def format_hit(hit: Hit, position: int = 1) -> str:
    """`[#id] YYYY-MM-DD (similarity 0.000)` or `(keyword match #N)`, then the note's text. A keyword hit's
    bm25 score means nothing on its own (tiny on a small store), so its place in the results is shown."""
    day = hit.created_at.astimezone(UTC).strftime("%Y-%m-%d")
    score = f"similarity {hit.score:.3f}" if hit.kind == "similarity" else f"keyword match #{position}"
    return f"[#{hit.id}] {day} ({score})\n{hit.content.strip()}"


def format_hits(hits: list[Hit]) -> str:
    """The search_memory reply for a non-empty store."""
    if not hits:
        return NO_HITS
    noun = "memory" if len(hits) == 1 else "memories"
    return f"Found {len(hits)} {noun}:" + "".join(f"\n\n{format_hit(h, n)}" for n, h in enumerate(hits, 1))


class _MemoryTool(BaseTool):
    name = ""
    description = ""
    parameters: dict = {}
    capabilities = ToolCapabilities()

    def __init__(self, ltm: LongTermMemory) -> None:
        self.ltm = ltm

    def execute(self, args: dict, ctx: TurnContext) -> str:
        try:
            return self.run(args)
        except ToolExecutionError:
            raise
        except ParseError as e:  # the arguments: the model reads the plain message
            raise ToolExecutionError(e.message) from e
        except OpenheimError as e:
            raise ToolExecutionError(str(e)) from e

    def run(self, args: dict) -> str:
        return ""


class RememberTool(_MemoryTool):
    name = "remember"
    description = (
        "Save a note to long-term memory so later sessions can find it: facts about the user, "
        "their preferences, decisions about the project. One self-contained fact per note, "
        f"at most {MAX_NOTE_CHARS} characters. Returns the new note's id."
    )
    parameters = {"type": "object", "properties": {"content": _CONTENT}, "required": ["content"]}
    capabilities = ToolCapabilities(read_only=False, kind="think")

    def run(self, args: dict) -> str:
        return f"Remembered as memory #{self.ltm.remember(note_arg(args))}."


class SearchMemoryTool(_MemoryTool):
    name = "search_memory"
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "top_k": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TOP_K,
                "description": f"How many notes to return (1-{MAX_TOP_K}).",
            },
        },
        "required": ["query"],
    }
    capabilities = ToolCapabilities(read_only=True, kind="search")

    def __init__(self, ltm: LongTermMemory) -> None:
        super().__init__(ltm)
        if ltm.semantic_configured:
            how = (
                "Matches by meaning (semantic search over embeddings), so a paraphrase finds a note; "
                "notes not embedded yet are matched by keyword."
            )
        else:
            how = (
                "Matches by keyword (full-text search for any of the query's words), so use words the "
                "note itself would contain."
            )
        self.description = (
            "Search long-term memory for notes saved in earlier sessions. "
            + how
            + " Returns each note's id, date, score and text."
        )

    def run(self, args: dict) -> str:
        query = require_str(args, "query", strip=True)
        k = clamp_top_k(optional_int(args, "top_k", digits=True), self.ltm.top_k)
        if self.ltm.count() == 0:
            return EMPTY_STORE
        return format_hits(self.ltm.search(query, k))


class EditMemoryTool(_MemoryTool):
    name = "edit_memory"
    description = (
        "Replace the text of a long-term memory note, keeping its id and date. Find the id with search_memory first."
    )
    parameters = {"type": "object", "properties": {"id": _ID, "content": _CONTENT}, "required": ["id", "content"]}
    capabilities = ToolCapabilities(read_only=False, kind="edit")

    def run(self, args: dict) -> str:
        memory_id, content = require_int(args, "id", digits=True), note_arg(args)
        if self.ltm.edit(memory_id, content):
            return f"Updated memory #{memory_id}."
        return f"No memory #{memory_id} exists; nothing to edit."


class ForgetTool(_MemoryTool):
    name = "forget"
    description = (
        "Delete a long-term memory note that is wrong or no longer true. Find the id with search_memory first."
    )
    parameters = {"type": "object", "properties": {"id": _ID}, "required": ["id"]}
    capabilities = ToolCapabilities(read_only=False, kind="delete")

    def run(self, args: dict) -> str:
        memory_id = require_int(args, "id", digits=True)
        if self.ltm.forget(memory_id):
            return f"Forgot memory #{memory_id}."
        return f"No memory #{memory_id} exists; nothing to forget."


def memory_tools(ltm: LongTermMemory) -> list[ToolHandler]:
    """The four memory tools over ``ltm`` (building them does not open the database)."""
    return [RememberTool(ltm), SearchMemoryTool(ltm), EditMemoryTool(ltm), ForgetTool(ltm)]
