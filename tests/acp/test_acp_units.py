"""Pure pieces of the ACP layer: content conversion, replay, titles, decisions, error mapping, framing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from acp_schema_check import check

from openheim.acp import toolcalls
from openheim.acp.connection import Connection, Writer, read_lines
from openheim.acp.convert import prompt_blocks, replay
from openheim.acp.permission import decision_from
from openheim.acp.terminal import TerminalRun, format_run
from openheim.core.tools import ToolRegistry, ViewContext
from openheim.tools.builtins import register_builtins


def _builtins() -> ToolRegistry:
    registry = ToolRegistry()
    register_builtins(registry, allow_shell=True)
    return registry


def tool_title(name, args):
    return _builtins().present(name, args, ViewContext(Path("/w"))).title


def tool_locations(name, args, cwd):
    return toolcalls.locations(_builtins().present(name, args, ViewContext(cwd)))


def diff_content(name, args, cwd, client_io):
    return toolcalls.diff_content(_builtins().present(name, args, ViewContext(cwd, client_io)))


from openheim.acp.util import RpcError, error_for, stop_reason
from openheim.core.models import (
    ImageBlock,
    Message,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from openheim.core.permission import Decision
from openheim.errors import (
    ConfigError,
    InvalidArgument,
    NotFound,
    OpenheimError,
    SessionBusy,
    SessionLocked,
    ToolExecutionError,
)


def test_prompt_blocks_convert_every_supported_kind():
    blocks = prompt_blocks(
        [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "QUJD", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///p/a%20b.py", "name": "a b.py"},
            {"type": "resource_link", "uri": "https://x.dev/doc", "name": "doc"},
            {"type": "resource", "resource": {"uri": "file:///p/c.py", "text": "print(1)"}},
            {"type": "resource", "resource": {"uri": "file:///p/i.png", "blob": "QUJD", "mimeType": "image/png"}},
        ]
    )
    assert blocks[0] == TextBlock("hi") and blocks[1] == ImageBlock("QUJD", "image/png")
    assert "/p/a b.py" in blocks[2].text and "read_file" in blocks[2].text
    assert blocks[3].text == "[referenced resource: doc (https://x.dev/doc)]"
    assert blocks[4].text == '<context source="/p/c.py">\nprint(1)\n</context>'
    assert blocks[5] == ImageBlock("QUJD", "image/png")


@pytest.mark.parametrize(
    "prompt, needle",
    [
        ([], "at least one"),
        (["text"], "must be a content block"),
        ([{"type": "audio", "data": "x", "mimeType": "audio/wav"}], "audio"),
        ([{"type": "text"}], "malformed 'text'"),
        ([{"type": "video"}], "unsupported prompt content type 'video'"),
        (
            [{"type": "resource", "resource": {"uri": "file:///x.bin", "blob": "AA==", "mimeType": "application/zip"}}],
            "binary",
        ),
    ],
)
def test_prompt_blocks_reject_with_a_reason(prompt, needle):
    with pytest.raises(RpcError) as e:
        prompt_blocks(prompt)
    assert e.value.code == -32602 and needle in e.value.message


def test_replay_mirrors_live_updates_and_closes_unanswered_calls():
    messages = [
        Message.system("sys"),
        Message("user", [TextBlock("read it"), ImageBlock("QUJD", "image/png")]),
        Message(
            "assistant",
            [
                ThinkingBlock("hmm"),
                TextBlock("ok"),
                ToolUseBlock("c1", "read_file", '{"path": "a.txt"}'),
                ToolUseBlock("c2", "execute_command", '{"command": "ls"}'),
            ],
        ),
        Message.tool_result("c1", "read_file", "alpha"),
        Message.user("next"),
    ]
    out = list(
        replay(messages, lambda name, args: _builtins().present(name, args, ViewContext(Path("/p"), with_diff=False)))
    )
    for update in out:
        check("SessionUpdate", update)
    kinds = [u["sessionUpdate"] for u in out]
    assert kinds == [
        "user_message_chunk",
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call",
        "tool_call_update",
        "tool_call_update",
        "user_message_chunk",
    ]
    assert out[4]["locations"] == [{"path": "/p/a.txt"}] and out[4]["title"] == "Read a.txt"
    assert out[6]["status"] == "completed" and out[7] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c2",
        "status": "failed",
        "content": [
            {
                "type": "content",
                "content": {
                    "type": "text",
                    "text": "No result: the turn was interrupted before this tool call finished.",
                },
            }
        ],
    }


def test_titles_and_locations():
    assert tool_title("execute_command", {"command": "git   status\n"}) == "Run `git status`"
    assert tool_title("search", {"pattern": "foo", "path": "src"}) == "Search `foo` in src"
    assert tool_title("web_fetch", {"url": "https://a.dev"}) == "Fetch https://a.dev"
    assert tool_title("remember", {"x": 1}) == "remember"
    assert tool_title("read_file", None) == "Read ."
    assert tool_locations("read_file", {"path": "a.py", "offset": 7}, Path("/w")) == [{"path": "/w/a.py", "line": 7}]
    assert tool_locations("list_dir", {}, Path("/w")) == [{"path": "/w"}]
    assert tool_locations("execute_command", {"command": "ls"}, Path("/w")) == []


def test_diffs_for_write_and_edit(tmp_path):
    (tmp_path / "f.txt").write_text("a\nb\n")
    write = diff_content("write_file", {"path": "f.txt", "content": "z\n"}, tmp_path, None)
    assert write == {"type": "diff", "path": str(tmp_path / "f.txt"), "oldText": "a\nb\n", "newText": "z\n"}
    new_file = diff_content("write_file", {"path": "new.txt", "content": "n"}, tmp_path, None)
    assert new_file["oldText"] is None
    edit = diff_content("edit_file", {"path": "f.txt", "old_string": "b", "new_string": "c"}, tmp_path, None)
    assert edit["newText"] == "a\nc\n"
    assert diff_content("edit_file", {"path": "f.txt", "old_string": "zz", "new_string": "c"}, tmp_path, None) is None
    assert diff_content("read_file", {"path": "f.txt"}, tmp_path, None) is None


def test_permission_answers_map_to_decisions():
    selected = lambda option: {"outcome": {"outcome": "selected", "optionId": option}}
    assert decision_from(selected("allow_always")) == Decision.ALLOW_ALWAYS
    assert decision_from(selected("reject_always")) == Decision.REJECT_ALWAYS
    for answer in (selected("bogus"), {"outcome": {"outcome": "cancelled"}}, None, {}, "x"):
        assert decision_from(answer) == Decision.REJECT_ONCE


def test_errors_map_to_json_rpc_codes_in_one_place():
    assert error_for(NotFound("session not found: x")).code == -32002
    assert error_for(InvalidArgument("bad")).code == -32602
    assert error_for(ConfigError("bad")).code == -32602
    busy = error_for(SessionBusy("s1"))
    assert busy.code == -32603 and busy.data == {"kind": "session_busy", "session_id": "s1"}
    assert error_for(SessionLocked("s1", 42, "h")).data["pid"] == 42
    assert error_for(OpenheimError("boom")).code == -32603
    assert "ValueError" in error_for(ValueError("x")).message


def test_stop_reasons_map_onto_acp():
    assert stop_reason(StopReason.MAX_ITERATIONS) == "max_turn_requests"
    assert stop_reason(StopReason.NO_CONTENT) == "end_turn"
    assert stop_reason(StopReason.CANCELLED) == "cancelled"


def test_terminal_results():
    assert format_run(TerminalRun("out\n", False, 0, None), 120) == "out\n"
    with pytest.raises(ToolExecutionError, match="exit code 2"):
        format_run(TerminalRun("bad", False, 2, None), 120)
    with pytest.raises(ToolExecutionError, match="timed out after 120 seconds"):
        format_run(TerminalRun("", False, None, None, timed_out=True), 120)
    with pytest.raises(ToolExecutionError, match="signal SIGKILL"):
        format_run(TerminalRun("", True, None, "SIGKILL"), 120)


def test_encode_is_one_utf8_line_even_with_newlines_and_lone_surrogates():
    from openheim.acp.connection import encode

    line = encode({"text": "a\nb\r\u2028 ✓ \udcff"})
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert json.loads(line) == {"text": "a\nb\r\u2028 ✓ ?"}


def test_read_lines_skips_blank_lines_and_flags_oversized_ones():
    data = io.BytesIO(b'{"a":1}\n\n' + b"x" * 50 + b"\n" + b'{"b":2}\n' + b'{"c":3}')
    assert list(read_lines(data, limit=20)) == [b'{"a":1}\n', None, b'{"b":2}\n', b'{"c":3}']


def test_responses_resolve_only_their_own_pending_requests():
    out = io.BytesIO()
    conn = Connection(Writer(out))
    pending = conn.start_request("fs/read_text_file", {"sessionId": "s", "path": "/a"})
    conn.resolve({"jsonrpc": "2.0", "id": None, "result": {}})
    conn.resolve({"jsonrpc": "2.0", "id": 999, "result": {}})
    conn.resolve({"jsonrpc": "2.0", "id": True, "result": {}})
    assert not pending._done.is_set()
    conn.resolve({"jsonrpc": "2.0", "id": pending.id, "error": {"code": -32002, "message": "no such file"}})
    with pytest.raises(RpcError, match="no such file"):
        pending.wait(timeout=1)
    later = conn.start_request("x", {})
    conn.close()
    with pytest.raises(RpcError, match="closed"):
        later.wait(timeout=1)


def test_oversized_line_is_refused_and_serving_continues(isolated_home):
    from cli_helpers import write_config
    from fake_llm import FakeLLMServer

    from openheim.acp.server import serve_stdio
    from openheim.client import OpenheimClient

    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        state = OpenheimClient.builder().build()
        lines = (
            b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"pad":"' + b"p" * 5000 + b'"}}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1}}\n'
        )
        out = io.BytesIO()
        assert serve_stdio(state, io.BytesIO(lines), out, max_line=1000) == 0
    frames = [json.loads(line) for line in out.getvalue().splitlines()]
    assert frames[0]["id"] is None and frames[0]["error"]["code"] == -32600
    assert "1000 bytes" in frames[0]["error"]["message"]
    assert frames[1]["id"] == 2 and frames[1]["result"]["protocolVersion"] == 1


def test_stray_prints_go_to_stderr_once_the_protocol_owns_stdout():
    import subprocess
    import sys

    from cli_helpers import ROOT

    code = (
        "import os\nfrom openheim.commands.acp import protocol_streams\n"
        "inp, out = protocol_streams()\nprint('stray print')\nos.system('echo stray child')\n"
        "out.write(b'{}\\n')\nout.flush()\n"
    )
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"{}\n"
    assert b"stray print" in r.stderr and b"stray child" in r.stderr


def test_writer_sends_batches_to_a_sink_and_gives_up_on_a_peer_that_stops_reading():
    import threading

    sent: list[bytes] = []
    release = threading.Event()
    overflowed = threading.Event()

    def stuck_sink(lines: list[bytes]) -> None:
        release.wait(5)  # the peer stops reading: the first write blocks
        sent.extend(lines)

    writer = Writer(stuck_sink, max_pending=1000, on_overflow=overflowed.set).start()
    for i in range(100):
        writer.send({"n": i, "pad": "x" * 40})
    assert overflowed.is_set() and writer.broken
    release.set()
    writer.close()
    assert len(sent) < 100 and all(line.endswith(b"\n") for line in sent)
