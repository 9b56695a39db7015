"""MCP resources and prompts end to end, against a real MCP server (tests/support/mcp_extras_server.py): the resource
tools through `openheim run` and a prompt through the chat (in tmux; ACP: tests/acp/test_acp_mcp_prompts.py);
plus the pure parts (prompt arguments, prompt text, resource listing pages)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from pathlib import Path

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall
from image_fixtures import images_in
from mcp_helpers import PYTHON, offered

pytest.importorskip("mcp")

EXTRAS = str(Path(__file__).resolve().parents[1] / "support" / "mcp_extras_server.py")
README = "the readme says: hello from the docs server"


def docs_toml(*args: str) -> str:
    listed = ", ".join(f'"{a}"' for a in (EXTRAS, *args))
    return f'\n[mcp_servers.docs]\ncommand = "{PYTHON}"\nargs = [{listed}]\n'


def tool_results(request) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


def last_user_text(request) -> str:
    content = [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


# --- resources through `openheim run` ---------------------------------------------------------------


def test_run_lists_then_reads_resources_as_read_only_tools(srv, isolated_home, tmp_path):
    from mcp_extras_server import LOGO

    write_config(isolated_home, srv.base_url, extra=docs_toml())
    srv.enqueue(
        Reply(tool_calls=[ToolCall("list_mcp_resources", {})]),
        Reply(
            tool_calls=[
                ToolCall("read_mcp_resource", {"server": "docs", "uri": "notes://readme"}),
                ToolCall("read_mcp_resource", {"server": "docs", "uri": "notes://logo"}),
                ToolCall("read_mcp_resource", {"server": "docs", "uri": "notes://drawing"}),
                ToolCall("read_mcp_resource", {"server": "docs", "uri": "notes://topic/cats"}),
                ToolCall("read_mcp_resource", {"server": "docs", "uri": "notes://nothing"}),
                ToolCall("read_mcp_resource", {"server": "wiki", "uri": "notes://readme"}),
            ]
        ),
        Reply(text="The readme says hello."),
    )
    r = openheim("run", "--approve", "reads", "what do the docs say", cwd=tmp_path)  # read-only: no approval asked
    assert r.returncode == 0, r.stderr
    assert r.stdout == "The readme says hello.\n"
    assert {"list_mcp_resources", "read_mcp_resource"} <= offered(srv.requests[0])

    (listing,) = tool_results(srv.requests[1])
    data = json.loads(listing)
    assert {
        "server": "docs",
        "uri": "notes://readme",
        "name": "readme",
        "mimeType": "text/plain",
        "description": "What the docs server is about",
    } in data["resources"]
    assert any(r["uri"] == "notes://logo" and r["mimeType"] == "image/png" for r in data["resources"])
    assert data["templates"] == [
        {
            "server": "docs",
            "uriTemplate": "notes://topic/{topic}",
            "name": "topic",
            "mimeType": "text/plain",
            "description": "Notes on one topic",
        }
    ]

    text, image, svg, templated, missing, unknown = tool_results(srv.requests[2])[1:]
    assert text == f"[resource notes://readme (text/plain)]\n{README}"
    assert image == "[resource notes://logo] [image: image/png, attached]"
    assert images_in(srv.requests[2].body, "openai") == [("image/png", base64.b64encode(LOGO).decode())]
    assert svg == "[resource notes://drawing] [image: image/svg+xml, not sent: not a PNG, JPEG, GIF or WebP image]"
    assert templated.endswith("notes on cats")
    for error in (missing, unknown):
        assert error.startswith("Error: ") and "\n" not in error
    assert "notes://nothing" in missing
    assert "unknown MCP server 'wiki'; servers with resources: docs" in unknown

    # the next run remembers that the server lists resources: the tools are offered from its first request
    srv.enqueue(Reply(text="again"))
    r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "list_mcp_resources" in offered(srv.requests[-1])


def test_no_resource_tools_for_a_server_without_resources(srv, isolated_home, tmp_path):
    """The SDK's servers advertise the resources capability even with none: an empty list offers no tools."""
    write_config(isolated_home, srv.base_url, extra=docs_toml("--no-resources"))
    srv.enqueue(Reply(text="ok"))
    r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not {"list_mcp_resources", "read_mcp_resource"} & offered(srv.requests[0])
    j = openheim("mcp", "--json", cwd=tmp_path)
    (docs,) = json.loads(j.stdout)["servers"]
    assert docs["resources"] is False and docs["prompts"] == ["review", "greet", "with_notes", "slow", "broken"]


# --- a prompt through the chat --------------------------------------------------------------------


@pytest.mark.skipif(not __import__("shutil").which("tmux") and not os.environ.get("CI"), reason="no tmux")
def test_the_chat_lists_prompts_and_sends_one(srv, isolated_home, tmp_path):
    from tmux_pane import TmuxPane, openheim_command, tui_env

    write_config(isolated_home, srv.base_url, extra=docs_toml())
    with TmuxPane(tmp_path, openheim_command(), tui_env(isolated_home), 120, 30) as pane:
        pane.wait_for("type a message to start")
        listing = "docs/review — Review a piece of code (code=… [language=…])"
        for _ in range(40):  # :mcp shows the servers as they are; the server is up within a few seconds
            pane.line(":mcp")
            screen = pane.wait_for("Esc back")
            pane.keys("Escape")
            if listing in screen:
                break
            time.sleep(0.25)
        assert listing in screen and "docs/greet — Say hello" in screen
        pane.line(":prompt docs/nope")
        pane.wait_for("unknown MCP prompt 'docs/nope'")
        pane.line(":prompt docs/review")
        pane.wait_for("prompt docs/review needs code; its arguments")
        srv.enqueue(Reply(text="Looks fine to me."))
        pane.line(":prompt docs/review code=x = 1 language=rust")
        pane.wait_for("Looks fine to me.")
    assert len(srv.requests) == 1
    assert last_user_text(srv.requests[0]) == "Please review this rust code:\nx = 1"


# --- the pure parts -----------------------------------------------------------------------------------------


def review_prompt():
    from openheim.mcp.prompts import McpPrompt, PromptArgument

    return McpPrompt(
        "docs", "review", "Review code", (PromptArgument("code", required=True), PromptArgument("language"))
    )


def test_prompt_arguments_are_name_value_pairs_whose_values_may_hold_spaces():
    from openheim.errors import InvalidArgument
    from openheim.mcp.prompts import parse_arguments

    prompt = review_prompt()
    assert parse_arguments(prompt, "code=a b  c language=go") == {"code": "a b  c", "language": "go"}
    assert parse_arguments(prompt, "language=go code='x=1 and y'") == {"language": "go", "code": "x=1 and y"}
    assert parse_arguments(prompt, "code=multi\nline") == {"code": "multi\nline"}
    with pytest.raises(InvalidArgument, match=r"unexpected 'hello'; give arguments as name=value"):
        parse_arguments(prompt, "hello code=x")
    with pytest.raises(InvalidArgument, match="needs code"):
        parse_arguments(prompt, "language=go")
    assert prompt.command == "docs.review" and prompt.ref == "docs/review"


def test_prompt_text_flattens_messages_and_embedded_resources():
    from openheim.mcp.prompts import prompt_text, prompts_of

    result = {
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Look at this:"}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "a://b", "text": "B"}}},
            {"role": "user", "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}},
        ]
    }
    assert prompt_text(result) == "Look at this:\n\n[resource a://b (unknown)]\nB\n\n[image: image/png]"
    (listed,) = prompts_of(
        "s p", [{"name": "a/b\x1b[2J", "arguments": [{"name": "x", "required": True}]}, {"title": "no name"}]
    )
    assert listed.command == "s_p.a_b_2J" and listed.usage() == "x=…"


class PagedSession:
    """A stand-in for the SDK's ClientSession that pages its resources 2 at a time."""

    def __init__(self, count: int) -> None:
        self.items = [{"uri": f"r://{i}", "name": f"r{i}"} for i in range(count)]
        self.calls: list[str | None] = []

    async def list_resources(self, params=None):
        from mcp.types import ListResourcesResult, Resource

        start = int(params.cursor) if params is not None else 0
        self.calls.append(params.cursor if params is not None else None)
        page = [Resource(**item) for item in self.items[start : start + 2]]
        more = str(start + 2) if start + 2 < len(self.items) else None
        return ListResourcesResult(resources=page, next_cursor=more)

    async def list_resource_templates(self, params=None):
        from mcp.types import ListResourceTemplatesResult

        return ListResourceTemplatesResult(resource_templates=[])


def test_a_listing_follows_cursors_until_its_room_is_full():
    from openheim.mcp.resources import list_entries

    session = PagedSession(7)
    resources, _, more = asyncio.run(list_entries(session, "s", None, 4))
    assert [r["uri"] for r in resources] == ["r://0", "r://1", "r://2", "r://3"] and more == "4"
    resources, _, more = asyncio.run(list_entries(session, "s", more, 100))
    assert [r["uri"] for r in resources] == ["r://4", "r://5", "r://6"] and more is None
    assert session.calls == [None, "2", "4", "6"]
