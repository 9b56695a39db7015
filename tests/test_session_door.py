"""The door stays one object per noun: the client is the process, a Session is one live conversation.

Checked from the source with ``ast``: no method of ``OpenheimClient`` or the runtime takes a session id and
forwards to another object's method of the same name (a per-session operation is written once, on Session);
``SessionHandle`` and the deprecated aliases are gone; one loaded-session class remains.
"""

from __future__ import annotations

import ast
from pathlib import Path

import openheim
from openheim.client import OpenheimClient
from openheim.runtime.runtime import Runtime
from openheim.runtime.session import Session

PACKAGE = Path(openheim.__file__).parent
DOORS = {PACKAGE / "client.py": ("OpenheimClient", "OpenheimBuilder"), PACKAGE / "runtime" / "runtime.py": ("Runtime",)}
PER_SESSION = {"start_turn", "cancel", "set_mode", "set_model", "switch_model", "compact", "fork", "fork_session",
               "undo", "plan_undo", "changes", "session_changes", "close_session", "let_go", "expand_mcp_prompt",
               "mcp_prompts", "get_session", "stream", "present"}  # fmt: skip


def methods(path: Path, classes: tuple[str, ...]) -> list[ast.FunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef) and cls.name in classes
        for node in cls.body
        if isinstance(node, ast.FunctionDef)
    ]


def takes_session_id(method: ast.FunctionDef) -> bool:
    return any(a.arg in ("session_id", "sid") for a in method.args.args + method.args.kwonlyargs)


def forwards_to_namesake(method: ast.FunctionDef) -> bool:
    """Whether the method calls another object's method of its own name (``x.name(...)``, x not self)."""
    for node in ast.walk(method):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method.name:
            owner = node.func.value
            if not (isinstance(owner, ast.Name) and owner.id == "self"):
                return True
    return False


def test_no_door_method_takes_a_session_id_and_forwards_to_a_namesake():
    found = [
        f"{path.name}:{m.lineno} {m.name}"
        for path, classes in DOORS.items()
        for m in methods(path, classes)
        if takes_session_id(m) and forwards_to_namesake(m)
    ]
    assert not found, f"forwarding a per-session operation by id: {found}; write it once, on Session"


def test_the_ast_check_can_fail():
    bad = ast.parse("def fork_session(self, session_id):\n    return self.state.fork_session(session_id)\n")
    method = bad.body[0]
    assert isinstance(method, ast.FunctionDef)
    assert takes_session_id(method) and forwards_to_namesake(method)


def test_per_session_operations_live_on_session_only():
    on_doors = {m.name for path, classes in DOORS.items() for m in methods(path, classes)}
    assert not (on_doors & PER_SESSION), f"per-session operations outside Session: {sorted(on_doors & PER_SESSION)}"
    for name in ("start_turn", "cancel", "switch_model", "set_mode", "compact", "fork", "changes", "plan_undo",
                 "undo", "mcp_prompts", "expand_mcp_prompt", "close", "context_usage", "present"):  # fmt: skip
        assert callable(getattr(Session, name)), name


def test_session_handle_and_the_deprecated_aliases_are_gone():
    assert not hasattr(openheim, "SessionHandle") and "SessionHandle" not in openheim.__all__
    for path in PACKAGE.rglob("*.py"):
        assert "SessionHandle" not in path.read_text(encoding="utf-8"), path
    assert not hasattr(Session, "stream")
    assert not hasattr(OpenheimClient, "cancel") and not hasattr(OpenheimClient, "get_session")
    assert openheim.Session is Session


def test_one_loaded_session_class():
    names = [
        node.name
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name.endswith(("LoadedSession", "ResumedSession"))
    ]
    assert names == ["LoadedSession"]


def test_the_runtime_keeps_only_the_map_and_services():
    """Its methods open, look up, load, list, delete and fork stored sessions, and close the process."""
    public = {m.name for m in methods(PACKAGE / "runtime" / "runtime.py", ("Runtime",)) if not m.name.startswith("_")}
    assert public <= {"new", "live", "resume", "stored", "discard", "fork_stored",
                      "mcp_statuses", "close"}, public  # fmt: skip
    assert hasattr(Runtime, "close")
