"""Validate frames sent by `openheim acp` against the vendored ACP v1 JSON schema."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import jsonschema

SCHEMA_PATH = Path(__file__).parent / "acp_schema" / "schema.json"

AGENT_REQUESTS = {
    "session/request_permission": "RequestPermissionRequest",
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "terminal/create": "CreateTerminalRequest",
    "terminal/output": "TerminalOutputRequest",
    "terminal/wait_for_exit": "WaitForTerminalExitRequest",
    "terminal/kill": "KillTerminalRequest",
    "terminal/release": "ReleaseTerminalRequest",
}
RESPONSES = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/resume": "ResumeSessionResponse",
    "session/close": "CloseSessionResponse",
    "session/delete": "DeleteSessionResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/prompt": "PromptResponse",
}


@cache
def _schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@cache
def validator(name: str) -> jsonschema.Draft202012Validator:
    """A validator for one definition of the schema (or the top-level 'Agent' message)."""
    schema = _schema()
    target = schema["anyOf"][0] if name == "Agent" else {"$ref": f"#/$defs/{name}"}
    return jsonschema.Draft202012Validator({**target, "$defs": schema["$defs"]})


def check(name: str, value: object) -> None:
    errors = sorted(validator(name).iter_errors(value), key=lambda e: e.path)
    if errors:
        detail = "; ".join(f"{list(e.path)}: {e.message[:200]}" for e in errors[:3])
        raise AssertionError(f"{name} does not match the ACP schema: {detail}\n{json.dumps(value)[:2000]}")


def check_agent_frame(frame: dict, client_methods: dict) -> None:
    """One frame from the agent; ``client_methods`` maps our request ids to their method names."""
    assert frame.get("jsonrpc") == "2.0", frame
    if "method" in frame:
        if "id" in frame:
            assert isinstance(frame["id"], (int, str)), frame
            check(AGENT_REQUESTS[frame["method"]], frame["params"])
        else:
            assert frame["method"] == "session/update", frame
            check("SessionNotification", frame["params"])
        return
    assert ("result" in frame) != ("error" in frame), frame
    if "error" in frame:
        check("Error", frame["error"])
        assert frame["id"] is None or isinstance(frame["id"], (int, str)), frame
        return
    method = client_methods.get(frame.get("id"))
    assert method is not None, f"a response to a request we never sent: {frame}"
    check(RESPONSES[method], frame["result"])
