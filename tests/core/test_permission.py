"""Permission gates, approval keys, session modes, the scoped executor and built-in registration."""

from __future__ import annotations

import pytest

from openheim.core.mode import AgentMode, tools_for_mode
from openheim.core.permission import (
    DENIED_BY_USER,
    AllowAll,
    Decision,
    FailClosedGate,
    PermissionRequest,
    PolicyGate,
    RememberingGate,
    approval_key,
    needs_permission,
    policy_denied_message,
)
from openheim.core.tool_args import (
    optional_bool,
    optional_int,
    optional_str,
    require_str,
    require_text,
)
from openheim.core.tools import ScopedExecutor, ToolCapabilities, ToolRegistry
from openheim.core.turn_context import CancelToken, TurnContext
from openheim.errors import InvalidArgument, ParseError, ToolExecutionError
from openheim.tools.builtins import register_builtins


def req(tool: str = "write_file", arguments: str = "{}") -> PermissionRequest:
    return PermissionRequest("call-1", tool, arguments)


def registry(allow_shell: bool = True) -> ToolRegistry:
    r = ToolRegistry()
    register_builtins(r, allow_shell=allow_shell)
    return r


class Scripted:
    """A gate that answers from a list and counts how often it was asked."""

    def __init__(self, *answers: Decision) -> None:
        self.answers = list(answers)
        self.asked: list[PermissionRequest] = []

    def request(self, request: PermissionRequest, cancel=None) -> Decision:
        self.asked.append(request)
        return self.answers.pop(0)


# --- approval keys -----------------------------------------------------------


@pytest.mark.parametrize(
    "arguments,expected",
    [
        ('{"command": "git status"}', 'execute_command:{"command":"git status"}'),
        ('{ "b": 1,\n "a": {"z": [1, {"y": 2, "x": 3}]} }', 'execute_command:{"a":{"z":[1,{"x":3,"y":2}]},"b":1}'),
        ("", "execute_command:{}"),
        ("not json", "execute_command:unparsed:not json"),
        ('{"command": "café"}', 'execute_command:{"command":"café"}'),
    ],
)
def test_exact_argument_keys(arguments, expected):
    assert approval_key("execute_command", arguments, "exact_arguments") == expected


def test_tool_name_scope_ignores_arguments():
    assert approval_key("write_file", '{"path": "a"}') == "write_file"
    assert approval_key("write_file", "garbage", "tool_name") == "write_file"


def test_git_status_approval_does_not_cover_a_longer_command():
    caps = registry().capabilities
    inner = Scripted(Decision.ALLOW_ALWAYS, Decision.REJECT_ONCE)
    gate = RememberingGate(inner, {}, caps)
    assert gate.request(req("execute_command", '{"command": "git status"}')) is Decision.ALLOW_ALWAYS
    assert gate.request(req("execute_command", '{"command":"git status"}')) is Decision.ALLOW_ALWAYS
    assert gate.request(req("execute_command", '{"command": "git status && rm -rf x"}')) is Decision.REJECT_ONCE
    assert len(inner.asked) == 2


# --- remembering gate ----------------------------------------------------------


def test_only_always_decisions_are_remembered():
    inner = Scripted(Decision.ALLOW_ONCE, Decision.REJECT_ONCE, Decision.REJECT_ALWAYS)
    approvals: dict[str, Decision] = {}
    gate = RememberingGate(inner, approvals)
    assert gate.request(req()) is Decision.ALLOW_ONCE
    assert gate.request(req()) is Decision.REJECT_ONCE
    assert approvals == {}
    assert gate.request(req()) is Decision.REJECT_ALWAYS
    assert gate.request(req()) is Decision.REJECT_ALWAYS
    assert approvals == {"write_file": Decision.REJECT_ALWAYS} and len(inner.asked) == 3


def test_approvals_are_shared_between_gates_of_one_session():
    approvals: dict[str, Decision] = {}
    parent = RememberingGate(Scripted(Decision.ALLOW_ALWAYS), approvals)
    child_inner = Scripted()
    child = RememberingGate(child_inner, approvals)
    parent.request(req("edit_file"))
    assert child.request(req("edit_file")) is Decision.ALLOW_ALWAYS and child_inner.asked == []


def test_remembering_gate_forwards_policy_traits():
    gate = RememberingGate(PolicyGate("none", registry().capabilities))
    assert gate.gates_read_only
    assert gate.denial_message(req()) == policy_denied_message("none")
    assert RememberingGate(AllowAll()).denial_message(req()) == DENIED_BY_USER


# --- policy gate -----------------------------------------------------------------


@pytest.mark.parametrize(
    "policy,tool,allowed",
    [
        ("all", "write_file", True),
        ("all", "read_file", True),
        ("all", "execute_command", True),
        ("reads", "read_file", True),
        ("reads", "search", True),
        ("reads", "web_fetch", True),
        ("reads", "write_file", False),
        ("reads", "execute_command", False),
        ("reads", "mcp__tool", False),
        ("none", "read_file", False),
        ("none", "write_file", False),
    ],
)
def test_policy_gate(policy, tool, allowed):
    gate = PolicyGate(policy, registry().capabilities)
    assert gate.request(req(tool)).allowed is allowed
    assert needs_permission(gate, registry().capabilities(tool)) is (
        policy == "none" or tool not in ("read_file", "search", "web_fetch")
    )


def test_policy_messages():
    assert (
        PolicyGate("reads", registry().capabilities).denial_message(req())
        == "Permission denied by policy (--approve reads): this tool is not read-only."
    )
    assert "--approve none" in policy_denied_message("none")
    with pytest.raises(ValueError, match="unknown approval policy 'some'"):
        PolicyGate("some", registry().capabilities)


def test_allow_all_and_default_message():
    assert AllowAll().request(req()) is Decision.ALLOW_ONCE
    assert AllowAll().denial_message(req()) == "Permission denied by user."
    assert not needs_permission(AllowAll(), ToolCapabilities(read_only=True))
    assert needs_permission(AllowAll(), ToolCapabilities())


# --- fail-closed base --------------------------------------------------------------


class Broken(FailClosedGate):
    def ask(self, request, cancel):
        raise RuntimeError("the UI went away")


class Silent(FailClosedGate):
    def ask(self, request, cancel):
        return None


def test_fail_closed_gate_rejects_on_failure_silence_and_cancel():
    assert Broken().request(req()) is Decision.REJECT_ONCE
    assert Silent().request(req()) is Decision.REJECT_ONCE
    token = CancelToken()
    token.cancel()

    class Eager(FailClosedGate):
        def ask(self, request, cancel):
            return Decision.ALLOW_ONCE

    assert Eager().request(req()) is Decision.ALLOW_ONCE
    assert Eager().request(req(), token) is Decision.REJECT_ONCE


# --- modes and scoped executor ---------------------------------------------------


def test_mode_parsing():
    assert AgentMode.parse("code") is AgentMode.CODE
    assert AgentMode.parse("architect") is AgentMode.ARCHITECT
    with pytest.raises(InvalidArgument, match="unknown session mode: ask"):
        AgentMode.parse("ask")


def test_architect_exposes_only_read_only_tools(tmp_path):
    tools = tools_for_mode(registry(), "architect")
    assert [t.name for t in tools.definitions()] == ["list_dir", "read_file", "search", "update_plan", "web_fetch"]
    with pytest.raises(
        ToolExecutionError,
        match="Tool 'write_file' is not available to this agent. "
        "Available tools: list_dir, read_file, search, update_plan, web_fetch",
    ):
        tools.execute("write_file", '{"path": "x", "content": "y"}', TurnContext(work_dir=tmp_path))
    assert not (tmp_path / "x").exists()


def test_architect_and_layers_follow_tools_that_arrive_later():
    """A session's MCP tools change as its servers come up: the layered and read-only views follow."""
    from openheim.core.tools import BaseTool, LayeredExecutor

    class Peek(BaseTool):
        name, description, capabilities = "srv__peek", "A read-only MCP tool.", ToolCapabilities(read_only=True)

        def execute(self, args: dict, ctx: TurnContext) -> str:
            return "peeked"

    late = ToolRegistry()
    tools = tools_for_mode(LayeredExecutor(registry(), late), "architect")
    assert "srv__peek" not in tools.names()
    late.register(Peek())
    assert "srv__peek" in [t.name for t in tools.definitions()]
    assert tools.execute("srv__peek", "{}", TurnContext()) == "peeked"


def test_code_mode_exposes_everything():
    full = registry()
    assert tools_for_mode(full, AgentMode.CODE) is full


def test_scoped_executor(tmp_path):
    (tmp_path / "f.txt").write_text("hi\n")
    scoped = ScopedExecutor(registry(), ["read_file", "no_such_tool"])
    assert scoped.names() == ["read_file"]
    ctx = TurnContext(work_dir=tmp_path, cwd=tmp_path)
    assert scoped.execute("read_file", '{"path": "f.txt"}', ctx) == "hi\n"
    assert scoped.capabilities("read_file").read_only
    assert not scoped.capabilities("write_file").read_only
    with pytest.raises(ToolExecutionError, match="Available tools: \\(none\\)"):
        ScopedExecutor(registry(), []).execute("read_file", "{}", ctx)


# --- registration and capabilities -------------------------------------------------


def test_builtins_and_shell_flag():
    assert registry(False).names() == [
        "edit_file",
        "list_dir",
        "read_file",
        "search",
        "update_plan",
        "web_fetch",
        "write_file",
    ]
    assert "execute_command" in registry(True)


@pytest.mark.parametrize(
    "name,read_only,kind,scope",
    [
        ("read_file", True, "read", "tool_name"),
        ("list_dir", True, "read", "tool_name"),
        ("search", True, "search", "tool_name"),
        ("web_fetch", True, "fetch", "tool_name"),
        ("write_file", False, "edit", "tool_name"),
        ("edit_file", False, "edit", "tool_name"),
        ("execute_command", False, "execute", "exact_arguments"),
        ("unknown", False, "other", "tool_name"),
    ],
)
def test_capabilities(name, read_only, kind, scope):
    caps = registry().capabilities(name)
    assert (caps.read_only, caps.kind, caps.approval_scope) == (read_only, kind, scope)


def test_definitions_are_valid_json_schema_objects():
    for tool in registry().definitions():
        assert tool.parameters["type"] == "object"
        assert set(tool.parameters.get("required", [])) <= set(tool.parameters["properties"])


# --- argument decoding -----------------------------------------------------------


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: require_str({}, "path"), "failed to parse arguments: missing field `path`"),
        (lambda: require_str({"path": ""}, "path"), "expected non-empty text, got an empty string"),
        (lambda: require_str({"path": None}, "path"), "invalid type: null, expected a string"),
        (lambda: require_str({"path": [1]}, "path"), "invalid type: sequence, expected a string"),
        (lambda: require_text({"c": {}}, "c"), "invalid type: map, expected a string"),
        (lambda: optional_int({"n": True}, "n"), "invalid type: boolean `true`, expected an integer"),
        (lambda: optional_int({"n": 1.5}, "n"), "invalid type: floating point `1.5`, expected an integer"),
        (lambda: optional_int({"n": -1}, "n", minimum=0), "invalid value: integer `-1`"),
        (lambda: optional_bool({"b": "yes"}, "b"), 'invalid type: string "yes", expected a boolean'),
        (lambda: optional_str({"s": 3}, "s"), "invalid type: integer `3`, expected a string"),
    ],
)
def test_argument_errors(call, message):
    with pytest.raises(ParseError) as info:
        call()
    assert message in info.value.message and info.value.message.startswith("failed to parse arguments: ")


def test_argument_values():
    assert require_text({"c": ""}, "c") == ""
    assert optional_int({"n": 3.0}, "n") == 3 and optional_int({}, "n") is None
    assert optional_bool({"b": None}, "b", default=True) is True
    assert optional_str({"s": "  "}, "s") is None


def test_registry_order_collisions_and_unknown_tools(caplog, tmp_path):
    from openheim.tools.read_file import ReadFileTool

    r = registry()
    with caplog.at_level("WARNING"):
        r.register(ReadFileTool())
    assert "Tool name collision" in caplog.text
    assert r.names() == sorted(r.names()) and len(r) == 8
    with pytest.raises(ToolExecutionError, match="Unknown tool: nope"):
        r.execute("nope", "{}", TurnContext(work_dir=tmp_path))
    with pytest.raises(ParseError, match="missing field `path`"):
        r.execute("read_file", "", TurnContext(work_dir=tmp_path))
