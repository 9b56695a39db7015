"""What the model is told about each built-in tool: names, descriptions, JSON Schemas and capabilities, as data.

A session lists these without importing any tool's implementation (tools/builtins.py loads one on its
first call); each implementation class takes its fields from here, so there is one source for both.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from openheim.core.capabilities import ToolCapabilities


class ToolSpec(NamedTuple):
    """A built-in tool as the model sees it, and where its implementation lives (``module:Class``)."""

    name: str
    implementation: str
    description: str
    parameters: dict[str, Any]
    capabilities: ToolCapabilities

    def fields(self) -> tuple[str, str, dict[str, Any], ToolCapabilities]:
        """(name, description, parameters, capabilities): a ToolHandler's listed members."""
        return self.name, self.description, self.parameters, self.capabilities


READ_FILE = ToolSpec(
    "read_file",
    "openheim.tools.read_file:ReadFileTool",
    (
        "Read a UTF-8 text file. Returns raw lines; at most 102400 bytes per call. Use offset "
        "(1-based first line) and limit (number of lines) to page through long files; a note at "
        "the end says how to read on."
    ),
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the working directory or absolute"},
            "offset": {"type": ["integer", "null"], "minimum": 1, "description": "First line to read (1-based)"},
            "limit": {"type": ["integer", "null"], "minimum": 1, "description": "Maximum number of lines"},
        },
        "required": ["path"],
    },
    ToolCapabilities(read_only=True, kind="read"),
)

WRITE_FILE = ToolSpec(
    "write_file",
    "openheim.tools.write_file:WriteFileTool",
    (
        "Write text to a file, replacing its content. Creates the file and any missing parent "
        "directories. Use edit_file for small changes to an existing file."
    ),
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the working directory or absolute"},
            "content": {"type": "string", "description": "The complete new content of the file"},
        },
        "required": ["path", "content"],
    },
    ToolCapabilities(read_only=False, kind="edit"),
)

EDIT_FILE = ToolSpec(
    "edit_file",
    "openheim.tools.edit_file:EditFileTool",
    (
        "Replace old_string with new_string in a file. old_string must match the file exactly "
        "(including whitespace) and be unique unless replace_all is true."
    ),
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the working directory or absolute"},
            "old_string": {"type": "string", "description": "The exact text to replace"},
            "new_string": {"type": "string", "description": "The replacement text"},
            "replace_all": {"type": ["boolean", "null"], "description": "Replace every occurrence (default false)"},
        },
        "required": ["path", "old_string", "new_string"],
    },
    ToolCapabilities(read_only=False, kind="edit"),
)

LIST_DIR = ToolSpec(
    "list_dir",
    "openheim.tools.list_dir:ListDirTool",
    (
        "List the entries of a directory (not recursive). Directories end with '/', symlinks show "
        "'name -> target'. At most 500 entries are shown. Defaults to the working directory."
    ),
    {
        "type": "object",
        "properties": {
            "path": {"type": ["string", "null"], "description": "Directory path (default: the working directory)"},
        },
    },
    ToolCapabilities(read_only=True, kind="read"),
)

SEARCH = ToolSpec(
    "search",
    "openheim.tools.search:SearchTool",
    (
        "Search file contents for a regular expression (Python `re` syntax) under a directory "
        "(default: the working directory) or in one file. Inside a git repository .gitignore and "
        ".ignore rules are respected; hidden files, binary and non-UTF-8 files are skipped. Output "
        "lines are `path:line: text`, at most 200 matches."
    ),
    {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression (Python re syntax)"},
            "path": {
                "type": ["string", "null"],
                "description": "Directory or file to search (default: the working directory)",
            },
            "case_insensitive": {"type": ["boolean", "null"], "description": "Ignore case (default false)"},
        },
        "required": ["pattern"],
    },
    ToolCapabilities(read_only=True, kind="search"),
)

WEB_FETCH = ToolSpec(
    "web_fetch",
    "openheim.tools.web_fetch:WebFetchTool",
    (
        "Fetch an http or https URL and return its content as text (HTML is converted to readable "
        "text; at most 256 KiB). Redirects are reported, not followed. Only public addresses can "
        "be fetched."
    ),
    {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The http:// or https:// URL to fetch"}},
        "required": ["url"],
    },
    ToolCapabilities(read_only=True, kind="fetch"),
)

EXECUTE_COMMAND = ToolSpec(
    "execute_command",
    "openheim.tools.execute_command:ExecuteCommandTool",
    (
        "Run a shell command with `sh -c` in the working directory (stdin is closed). Returns "
        "stdout, then stderr under a '[stderr]' line when there is any. Times out after 120 s; "
        "each stream is capped at 64 KiB."
    ),
    {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The shell command to run"}},
        "required": ["command"],
    },
    ToolCapabilities(read_only=False, kind="execute", approval_scope="exact_arguments"),
)

UPDATE_PLAN = ToolSpec(
    "update_plan",
    "openheim.tools.plan:UpdatePlanTool",
    (
        "Show the user your plan for a task of several steps: the whole list each time, each step "
        "pending, in_progress (at most one) or completed."
    ),
    {
        "type": "object",
        "properties": {
            "plan": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "step": {"type": "string"},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                    },
                    "required": ["step", "status"],
                },
            },
            "explanation": {"type": "string"},
        },
        "required": ["plan"],
    },
    ToolCapabilities(read_only=True, kind="think"),
)

# the tools every session gets, in registration order (execute_command only when allow_shell is on)
ALWAYS = (READ_FILE, WRITE_FILE, EDIT_FILE, LIST_DIR, SEARCH, WEB_FETCH, UPDATE_PLAN)
