"""The package type-checks with mypy (the settings in pyproject.toml), and so does code that uses its public API."""

from __future__ import annotations

import ast
import enum
import inspect
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from source_ast import parse

import openheim

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mypy")


def mypy(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MYPYPATH": "", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_the_package_is_mypy_clean(cache):
    result = mypy(cwd=ROOT, cache=cache)  # [tool.mypy] names the package and the settings
    assert result.returncode == 0, result.stdout + result.stderr


def test_py_typed_ships_with_the_package():
    assert (ROOT / "openheim" / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["openheim"]


def test_the_mypy_settings_keep_every_def_annotated():
    """The strictness the package is checked at: an unannotated public method would fail the test above."""
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    for flag in ("check_untyped_defs", "disallow_untyped_defs", "disallow_incomplete_defs"):
        assert settings.get(flag) is True, flag
    for override in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"].get("overrides", []):
        assert "ignore_errors" not in override, override
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        assert not any(m.startswith("openheim") for m in modules), override


def test_type_checkers_see_every_lazy_public_name():
    """``openheim/__init__.py`` resolves names lazily; its TYPE_CHECKING imports must name the same objects."""
    tree = parse((ROOT / "openheim" / "__init__.py").read_text())
    seen = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                for alias in imp.names:
                    assert alias.asname == alias.name, "re-export as the same name (no_implicit_reexport)"
                    seen[alias.name] = imp.module
    assert seen == openheim._LAZY


def _public_callables() -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for name in openheim.__all__:
        obj = getattr(openheim, name)
        if inspect.isfunction(obj):
            out.append((name, obj))
        elif inspect.isclass(obj) and not issubclass(obj, enum.Enum):
            for attr, member in vars(obj).items():
                if attr.startswith("_") and attr not in ("__init__", "__call__", "__enter__", "__exit__", "__iter__"):
                    continue
                func = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                if inspect.isfunction(func) and func.__module__.startswith("openheim"):  # not typing's own
                    out.append((f"{name}.{attr}", func))
    return out


def test_every_public_function_and_method_is_fully_annotated():
    from openheim.client import OpenheimBuilder

    callables = _public_callables()
    callables += [
        (f"OpenheimBuilder.{a}", f)
        for a, f in vars(OpenheimBuilder).items()
        if inspect.isfunction(f) and not a.startswith("_")
    ]
    assert len(callables) > 60  # the client, the builder, the protocols, tool, serve_acp ...
    missing = []
    for qualname, func in callables:
        sig = inspect.signature(func)
        params = list(sig.parameters.values())
        if params and params[0].name in ("self", "cls"):
            params = params[1:]
        missing += [f"{qualname}({p.name})" for p in params if p.annotation is inspect.Parameter.empty]
        if sig.return_annotation is inspect.Signature.empty:
            missing.append(f"{qualname} -> ?")
    assert missing == []


USER_CODE = '''
import queue
from pathlib import Path
from typing import assert_type

import openheim
from openheim import (AgentResult, BaseTool, CancelToken, Choice, ClientIo, Decision, EmbeddingClient,
                      FunctionTool, LlmClient, Message, OpenheimClient, PermissionGate, PermissionRequest,
                      Session, StreamEvent, ToolCapabilities, ToolHandler, ToolView, TurnContext, serve_acp,
                      tool)
from openheim.core import events
from openheim.core.llm.base import OnChunk
from openheim.core.models import TextBlock, Tool
from openheim.core.tools import ViewContext


@tool
def shout(text: str) -> str:
    """Upper-case text."""
    return text.upper()


@tool(read_only=True, kind="read")
def whisper(text: str) -> str:
    return text.lower()


assert_type(shout, FunctionTool)
assert_type(whisper, FunctionTool)


class Echo:
    """A model of one's own: the LlmClient protocol, structurally."""

    provider_name = "echo"
    model = "echo-1"

    def stream(self, messages: list[Message], tools: list[Tool], on_chunk: OnChunk, cancel: CancelToken) -> Choice:
        return Choice(Message("assistant", [TextBlock("hi")]))


class Count(BaseTool):
    name = "count"
    capabilities = ToolCapabilities(read_only=True, kind="read")

    def execute(self, args: dict[str, object], ctx: TurnContext) -> str:
        return str(len(str(args.get("text"))))

    def present(self, args: dict[str, object] | None, where: ViewContext) -> ToolView:
        return ToolView("Count")


class Ask(PermissionGate):
    def request(self, req: PermissionRequest, cancel: CancelToken | None = None) -> Decision:
        return Decision.ALLOW_ONCE if req.tool_name == "count" else Decision.REJECT_ONCE


class Zeros:
    model = "zeros"

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[0.0] for _ in texts]


llm: LlmClient = Echo()
handler: ToolHandler = Count()
gate: PermissionGate = Ask()
embedder: EmbeddingClient = Zeros()

client = (OpenheimClient.builder().api_key("k").model("m").max_iterations(3).tool(shout).tool(Count())
          .llm_factory(lambda config: Echo()).build())
with client:
    session = client.new_session().permission_gate(gate)
    assert_type(session, Session)
    result = session.prompt("hi")
    assert_type(result, AgentResult)
    received: queue.Queue[StreamEvent] = queue.Queue()
    session.prompt("again", on_event=received.put)
    usage = session.context_usage()
    for event in session.start_turn("more"):
        if isinstance(event, events.ToolCall):
            print(event.tool_name, event.arguments)
    io: ClientIo | None = None
    assert_type(openheim.__version__, str)

    def drop(lines: list[bytes]) -> None:
        pass

    assert_type(serve_acp(client, [b"{}"], drop), int)  # checked, not run
'''

WRONG_CODE = """
from openheim import LlmClient, Message, OpenheimClient, tool

client = OpenheimClient.builder().max_iterations("three").build()
client.new_session().prompt(42)


class NotAModel:
    provider_name = "x"
    model = "m"

    def stream(self, messages: list[Message]) -> str:
        return ""


llm: LlmClient = NotAModel()
tool(read_only="yes")
"""


def test_user_code_type_checks_against_the_public_api(tmp_path, cache):
    (tmp_path / "user.py").write_text(textwrap.dedent(USER_CODE))
    result = mypy("--strict", "--follow-imports=silent", "user.py", cwd=tmp_path, cache=cache)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mistakes_in_user_code_are_caught(tmp_path, cache):
    """Proof that the public names carry their types (a lazily resolved name would be ``object`` or Any)."""
    (tmp_path / "wrong.py").write_text(textwrap.dedent(WRONG_CODE))
    result = mypy("--follow-imports=silent", "wrong.py", cwd=tmp_path, cache=cache)
    assert result.returncode == 1
    assert 'incompatible type "str"; expected "int' in result.stdout
    assert 'incompatible type "int"' in result.stdout
    assert 'expression has type "NotAModel", variable has type "LlmClient"' in result.stdout
    assert 'No overload variant of "tool" matches argument type "str"' in result.stdout
