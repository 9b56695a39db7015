"""`openheim acp` driven by the real Python ACP client library (asyncio lives only here, in the tests)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from acp_schema_check import check_agent_frame
from acp_wire import client_env
from fake_llm import Reply, ToolCall

acp = pytest.importorskip("acp")
from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.connection import StreamDirection
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)


class FakeEditor:
    """An ACP client: records updates, answers permission, serves buffers and runs terminals."""

    def __init__(self, choice: str = "allow_once", buffers: dict | None = None) -> None:
        self.choice = choice
        self.buffers = buffers or {}
        self.updates: list[Any] = []
        self.asked: list[Any] = []
        self.reads: list[str] = []
        self.writes: dict[str, str] = {}
        self.terminal_calls: list[str] = []
        self.created: list[list[str]] = []  # each terminal's command and arguments
        self.terminals: dict[str, asyncio.subprocess.Process] = {}
        self.hold_permission: asyncio.Event | None = None

    def on_connect(self, conn: Any) -> None:
        pass

    async def request_permission(self, options: list, session_id: str, tool_call: Any, **kw: Any) -> Any:
        self.asked.append(tool_call)
        if self.hold_permission is not None:
            await self.hold_permission.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.choice))

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)

    async def read_text_file(
        self, path: str, session_id: str, line: int | None = None, limit: int | None = None, **kw: Any
    ) -> Any:
        self.reads.append(path)
        text = self.buffers[path] if path in self.buffers else Path(path).read_text()
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, content: str, path: str, session_id: str, **kw: Any) -> Any:
        self.writes[path] = content
        self.buffers[path] = content
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        command: str,
        session_id: str,
        args: list | None = None,
        env: Any = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kw: Any,
    ) -> Any:
        self.terminal_calls.append("create")
        self.created.append([command, *(args or [])])
        proc = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        terminal_id = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal_id] = proc
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        self.terminal_calls.append("wait")
        code = await self.terminals[terminal_id].wait()
        return WaitForTerminalExitResponse(exit_code=code)

    async def terminal_output(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        self.terminal_calls.append("output")
        proc = self.terminals[terminal_id]
        data = await proc.stdout.read() if proc.returncode is not None else b""
        return TerminalOutputResponse(
            output=data.decode(), truncated=False, exit_status=TerminalExitStatus(exit_code=proc.returncode)
        )

    async def kill_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        self.terminal_calls.append("kill")
        _kill(self.terminals[terminal_id])
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kw: Any) -> Any:
        self.terminal_calls.append("release")
        _kill(self.terminals[terminal_id])
        return ReleaseTerminalResponse()

    async def ext_method(self, method: str, params: dict) -> dict:
        return {}

    async def ext_notification(self, method: str, params: dict) -> None:
        pass

    def of(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]

    def text(self) -> str:
        return "".join(u.content.text for u in self.of("agent_message_chunk"))


def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass


class Tap:
    """Every raw frame, in order; frames from the agent are checked against the ACP schema."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, dict]] = []
        self.methods: dict[Any, str] = {}
        self.errors: list[str] = []

    def __call__(self, event: Any) -> None:
        message = event.message
        if event.direction == StreamDirection.OUTGOING:
            if "method" in message and "id" in message:
                self.methods[message["id"]] = message["method"]
            self.frames.append(("out", message))
            return
        self.frames.append(("in", message))
        try:
            check_agent_frame(message, self.methods)
        except AssertionError as e:
            self.errors.append(str(e))


CAPS = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True)


def run(scenario, editor: FakeEditor, tmp_path: Path, caps: ClientCapabilities | None = None) -> Tap:
    """Spawn `openheim acp`, initialize, run ``scenario(conn)``, and check every frame."""
    tap = Tap()

    async def main() -> None:
        with open(tmp_path / "agent.err", "ab") as err:
            async with spawn_agent_process(
                editor,
                sys.executable,
                "-m",
                "openheim",
                "acp",
                env=client_env(),
                cwd="/",
                transport_kwargs={"stderr": err},
                observers=[tap],
            ) as (conn, _):
                init = await conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=caps or ClientCapabilities(),
                    client_info=Implementation(name="pytest", version="1"),
                )
                assert init.protocol_version == 1
                await asyncio.wait_for(scenario(conn), 30)

    asyncio.run(main())
    assert tap.errors == []
    return tap


def test_prompt_with_tool_calls(srv, project, tmp_path):
    (project / "in.txt").write_text("input data\n")
    srv.enqueue(
        Reply(
            text="Reading.",
            tool_calls=[
                ToolCall("read_file", {"path": "in.txt"}),
                ToolCall("write_file", {"path": "out.txt", "content": "copied\n"}),
            ],
        ),
        Reply(text="Done."),
    )
    editor = FakeEditor()

    async def scenario(conn):
        session = await conn.new_session(cwd=str(project), mcp_servers=[])
        assert [o.id for o in session.config_options] == ["model", "mode"]
        result = await conn.prompt(session_id=session.session_id, prompt=[text_block("copy it")])
        assert result.stop_reason == "end_turn"

    run(scenario, editor, tmp_path)
    assert editor.text() == "Reading.Done."
    assert (project / "out.txt").read_text() == "copied\n"
    starts = {u.title: u for u in editor.of("tool_call")}
    assert set(starts) == {"Read in.txt", "Write out.txt"}
    assert starts["Write out.txt"].content[0].new_text == "copied\n"
    assert [a.title for a in editor.asked] == ["Write out.txt"]
    final = {u.tool_call_id: u.status for u in editor.of("tool_call_update") if u.status in ("completed", "failed")}
    assert sorted(final.values()) == ["completed", "completed"]


def test_permission_deny_allow_and_always(srv, project, tmp_path):
    write = lambda name: Reply(tool_calls=[ToolCall("write_file", {"path": name, "content": name})])
    srv.enqueue(
        write("denied.txt"),
        Reply(text="ok"),
        write("always.txt"),
        Reply(text="ok"),
        write("again.txt"),
        Reply(text="ok"),
    )
    editor = FakeEditor(choice="reject_once")

    async def scenario(conn):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("one")])
        editor.choice = "allow_always"
        await conn.prompt(session_id=sid, prompt=[text_block("two")])
        editor.choice = "reject_always"  # never asked again: the earlier allow_always is remembered
        await conn.prompt(session_id=sid, prompt=[text_block("three")])

    run(scenario, editor, tmp_path)
    assert not (project / "denied.txt").exists()
    assert (project / "always.txt").exists() and (project / "again.txt").exists()
    assert len(editor.asked) == 2


def test_fs_delegation_uses_the_editor_buffer_not_the_disk(srv, project, tmp_path):
    path = project / "main.py"
    path.write_text("DISK = 1\n")
    srv.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "main.py"})]),
        Reply(
            tool_calls=[
                ToolCall("edit_file", {"path": "main.py", "old_string": "BUFFER = 2", "new_string": "EDITED = 3"})
            ]
        ),
        Reply(text="edited"),
    )
    editor = FakeEditor(buffers={str(path): "BUFFER = 2\n"})

    async def scenario(conn):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        result = await conn.prompt(session_id=sid, prompt=[text_block("edit")])
        assert result.stop_reason == "end_turn"

    run(scenario, editor, tmp_path, CAPS)
    assert "BUFFER = 2" in str(srv.requests[1].body["messages"][-1])
    assert editor.writes == {str(path): "EDITED = 3\n"}
    assert path.read_text() == "DISK = 1\n"
    diff = next(u for u in editor.of("tool_call") if u.title == "Edit main.py").content[0]
    assert (diff.old_text, diff.new_text) == ("BUFFER = 2\n", "EDITED = 3\n")


def test_terminal_delegation_embeds_the_terminal(srv, project, tmp_path):
    srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": "echo from-terminal"})]), Reply(text="ran"))
    editor = FakeEditor()

    async def scenario(conn):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("run")])).stop_reason == "end_turn"

    run(scenario, editor, tmp_path, CAPS)
    assert editor.terminal_calls == ["create", "wait", "output", "release"]
    assert "from-terminal" in str(srv.requests[1].body["messages"][-1])
    embedded = [c for u in editor.of("tool_call_update") for c in (u.content or []) if c.type == "terminal"]
    assert embedded and embedded[0].terminal_id == "term-1"


def test_terminal_delegation_runs_the_command_inside_the_sandbox_helper(srv, project, tmp_path):
    outside = tmp_path / "outside-acp"
    srv.enqueue(
        Reply(tool_calls=[ToolCall("execute_command", {"command": f"echo inside > in.txt; touch {outside}"})]),
        Reply(text="ran"),
    )
    editor = FakeEditor()

    async def scenario(conn):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("run")])).stop_reason == "end_turn"

    run(scenario, editor, tmp_path, CAPS)
    created = editor.created[0]
    assert created[0] == sys.executable and "--mode" in created and created[-3:-1] == ["sh", "-c"]
    assert created[created.index("--write") + 1] == str(project.resolve())
    assert (project / "in.txt").read_text() == "inside\n" and not outside.exists()
    assert "sandbox (workspace-write) refused writing" in str(srv.requests[1].body["messages"][-1])


def test_cancel_during_streaming(srv, project, tmp_path):
    srv.enqueue(Reply(text=" ".join(["word"] * 300), delay=0.03))
    editor = FakeEditor()

    async def scenario(conn):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        task = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("long")]))
        while not editor.of("agent_message_chunk"):
            await asyncio.sleep(0.01)
        started = time.monotonic()
        await conn.cancel(session_id=sid)
        assert (await task).stop_reason == "cancelled"
        assert time.monotonic() - started < 1.0
        again = await conn.prompt(session_id=sid, prompt=[text_block("next")])
        assert again.stop_reason == "end_turn"

    run(scenario, editor, tmp_path)
    assert editor.text().endswith("echo: next")


def test_cancel_during_a_pending_permission(srv, project, tmp_path):
    srv.enqueue(Reply(tool_calls=[ToolCall("write_file", {"path": "never.txt", "content": "x"})]))
    editor = FakeEditor()

    async def scenario(conn):
        editor.hold_permission = asyncio.Event()
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        task = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("write")]))
        while not editor.asked:
            await asyncio.sleep(0.01)
        await conn.cancel(session_id=sid)
        editor.hold_permission.set()  # the client answers `cancelled`, as the spec requires
        assert (await task).stop_reason == "cancelled"

    run(scenario, editor, tmp_path)
    assert not (project / "never.txt").exists()
    assert editor.of("tool_call_update")[-1].status == "failed"


def test_cancel_during_a_long_terminal_command(srv, project, tmp_path):
    srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": "sleep 30"})]))
    editor = FakeEditor()

    async def scenario(conn):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        task = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("sleep")]))
        while "wait" not in editor.terminal_calls:
            await asyncio.sleep(0.01)
        started = time.monotonic()
        await conn.cancel(session_id=sid)
        assert (await task).stop_reason == "cancelled"
        assert time.monotonic() - started < 1.0
        for _ in range(100):
            if "release" in editor.terminal_calls:
                break
            await asyncio.sleep(0.01)

    run(scenario, editor, tmp_path, CAPS)
    assert "kill" in editor.terminal_calls and "release" in editor.terminal_calls
    assert editor.terminals["term-1"].returncode is not None


def test_load_replays_in_a_fresh_process_then_list_resume_close(srv, project, tmp_path):
    (project / "a.txt").write_text("alpha\n")
    srv.enqueue(
        Reply(text="Let me read.", thinking="plan", tool_calls=[ToolCall("read_file", {"path": "a.txt"})]),
        Reply(text="It is alpha."),
    )
    first = FakeEditor()
    ids = {}

    async def make(conn):
        ids["sid"] = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=ids["sid"], prompt=[text_block("what is in a.txt?")])

    run(make, first, tmp_path)
    second = FakeEditor()

    async def reload(conn):
        listed = await conn.list_sessions(cwd=str(project))
        assert [s.session_id for s in listed.sessions] == [ids["sid"]]
        await conn.load_session(cwd=str(project), session_id=ids["sid"], mcp_servers=[])
        resumed = await conn.resume_session(cwd=str(project), session_id=ids["sid"], mcp_servers=[])
        assert resumed.modes.current_mode_id == "code"
        await conn.close_session(session_id=ids["sid"])

    tap = run(reload, second, tmp_path)
    load_id = next(m["id"] for d, m in tap.frames if d == "out" and m.get("method") == "session/load")
    incoming = [m for d, m in tap.frames if d == "in"]
    answer = next(i for i, m in enumerate(incoming) if m.get("id") == load_id and "method" not in m)
    replayed = [
        m["params"]["update"]["sessionUpdate"] for m in incoming[:answer] if m.get("method") == "session/update"
    ]
    assert replayed == [
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    texts = [u.content.text for u in second.updates if u.session_update == "agent_message_chunk"]
    assert texts == ["Let me read.", "It is alpha."]


class PagingEditor(FakeEditor):
    """An editor that serves `line` and `limit` as ACP defines them (1-based first line, line count)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.asked_for: list[tuple] = []

    async def read_text_file(
        self, path: str, session_id: str, line: int | None = None, limit: int | None = None, **kw: Any
    ) -> Any:
        self.asked_for.append((line, limit))
        rows = Path(path).read_text().splitlines(keepends=True)[(line or 1) - 1 :]
        return ReadTextFileResponse(content="".join(rows[:limit] if limit is not None else rows))


def test_read_through_the_editor_tells_the_model_how_to_read_on(srv, project, tmp_path):
    (project / "long.txt").write_text("".join(f"row {i}\n" for i in range(1, 11)))
    srv.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "long.txt", "offset": 3, "limit": 4})]),
        Reply(tool_calls=[ToolCall("read_file", {"path": "long.txt", "offset": 7, "limit": 4})]),
        Reply(text="done"),
    )
    editor = PagingEditor()

    async def scenario(conn):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("read")])).stop_reason == "end_turn"

    run(scenario, editor, tmp_path, CAPS)
    assert editor.asked_for == [(3, 5), (7, 5)]  # one line more than the model asked for
    first = srv.requests[1].body["messages"][-1]["content"]
    assert first == "row 3\nrow 4\nrow 5\nrow 6\n[lines 3–6 shown; call again with offset=7 to read on]"
    assert srv.requests[2].body["messages"][-1]["content"] == "row 7\nrow 8\nrow 9\nrow 10\n"
