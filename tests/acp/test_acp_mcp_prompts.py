"""`openheim acp` with an MCP server that has prompts, driven by the real ACP client library: each prompt is an
available command (`server.name`, its arguments as the input hint) next to the built-in ones, and
`/server.name name=value` reaches the model as the prompt's text; a cancel while it is fetched ends the prompt."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from acp_wire import client_env
from fake_llm import Reply
from mcp_helpers import PYTHON
from test_acp_client import FakeEditor, Tap

pytest.importorskip("mcp")
acp = pytest.importorskip("acp")
from acp import spawn_agent_process, text_block
from acp.schema import McpServerStdio

EXTRAS = str(Path(__file__).resolve().parents[1] / "support" / "mcp_extras_server.py")


def last_user_text(request) -> str:
    content = [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def test_acp_announces_prompts_and_expands_a_slash_command(srv, project, tmp_path):
    srv.enqueue(Reply(text="Reviewed."))
    editor, tap = FakeEditor(), Tap()  # every frame from the agent is checked against the ACP schema

    async def main() -> tuple[list, str, str]:
        with open(tmp_path / "agent.err", "ab") as err:
            async with spawn_agent_process(
                editor,
                sys.executable,
                "-m",
                "openheim",
                "acp",
                env=client_env(),
                cwd=str(project),
                transport_kwargs={"stderr": err},
                observers=[tap],
            ) as (conn, _proc):
                await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                server = McpServerStdio(name="docs", command=PYTHON, args=[EXTRAS], env=[])
                session = await conn.new_session(cwd=str(project), mcp_servers=[server])
                for _ in range(300):
                    names = [c.name for u in editor.of("available_commands_update") for c in u.available_commands]
                    if "docs.review" in names:
                        break
                    await asyncio.sleep(0.05)
                commands = editor.of("available_commands_update")[-1].available_commands
                missing = await conn.prompt(session_id=session.session_id, prompt=[text_block("/docs.review")])
                error = editor.text()
                # a cancel while the prompt is fetched answers "cancelled" at once; no turn runs
                slow = asyncio.ensure_future(
                    conn.prompt(session_id=session.session_id, prompt=[text_block("/docs.slow seconds=5")])
                )
                await asyncio.sleep(0.3)
                await conn.cancel(session_id=session.session_id)
                cancelled = (await asyncio.wait_for(slow, 2)).stop_reason
                done = await conn.prompt(
                    session_id=session.session_id, prompt=[text_block("/docs.review code=print(1)")]
                )
                return commands, f"{missing.stop_reason} {error}", f"{cancelled} {done.stop_reason}"

    commands, missing, done = asyncio.run(main())
    assert tap.errors == []
    by_name = {c.name: c for c in commands}
    assert {"compact", "undo", "docs.review", "docs.greet"} <= set(by_name)
    assert by_name["docs.review"].description == "Review a piece of code"
    assert by_name["docs.review"].input.root.hint == "code=… [language=…]"
    assert (
        missing == "end_turn /docs.review: Invalid argument: prompt docs/review needs code; its arguments: "
        "code=… [language=…]\n"
    )
    assert done == "cancelled end_turn"
    assert len(srv.requests) == 1
    assert last_user_text(srv.requests[0]) == "Please review this python code:\nprint(1)"
