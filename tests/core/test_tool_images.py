"""Images from MCP tool results: checked like prompt images, carried by the tool-result block, put where each
wire accepts them (Anthropic: in tool_result.content; Chat Completions: a user message after the reply's tool
messages; Gemini: inlineData parts after the functionResponse parts), stored by hash and sent again on resume."""

from __future__ import annotations

import base64
import json

import pytest
from cli_helpers import fake_provider, openheim
from fake_llm import Reply, ToolCall
from mcp_helpers import new_tag, pids_with, toml_server, wait_until

from openheim.config.agent_config import AgentConfig
from openheim.conversation import images as stored_images
from openheim.core.context import IMAGE_BYTES, message_bytes
from openheim.core.images import MAX_IMAGE_BYTES
from openheim.core.llm import anthropic, gemini, openai
from openheim.core.models import ImageBlock, Message, ToolResultBlock, ToolUseBlock, block_from_dict
from openheim.core.tool_calls import run_tool_calls
from openheim.core.tool_images import UNSUPPORTED, ResultText, checked_image, split_result
from openheim.core.tools import BaseTool, ToolRegistry
from openheim.core.turn_context import TurnContext
from openheim.mcp.content import result_text

pytest.importorskip("mcp")

PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
PNG = base64.b64decode(PNG_B64)
GIF_B64 = base64.b64encode(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;").decode()
ATTACHED = "a red dot\n[image: image/png, attached]"
TOO_BIG = "[image: image/png, not sent: 5.0 MB, over the 5.0 MB limit]"


def conversation(*results: ToolResultBlock, then: Message | None = None) -> list[Message]:
    """A user prompt, one assistant reply calling a tool per result, the results (and ``then``)."""
    calls = [ToolUseBlock(r.tool_call_id, r.tool_name, "{}") for r in results]
    messages = [Message.system("sys"), Message.user("look"), Message("assistant", calls)]
    messages += [Message("tool", [r]) for r in results]
    return messages + ([then] if then is not None else [])


def with_image(call_id: str = "call_1", name: str = "fake__picture", *images: ImageBlock) -> ToolResultBlock:
    return ToolResultBlock(call_id, name, ATTACHED, images=list(images or [ImageBlock(PNG_B64, "image/png")]))


# --- the check and the result text ----------------------------------------------------------


def test_an_image_is_typed_by_its_bytes_and_held_to_the_prompt_limits():
    assert checked_image(PNG_B64) == ImageBlock(PNG_B64, "image/png")
    assert checked_image(PNG_B64[:40] + "\n" + PNG_B64[40:]) == ImageBlock(PNG_B64, "image/png")
    assert checked_image(GIF_B64) == ImageBlock(GIF_B64, "image/gif")  # whatever mimeType the server said
    assert checked_image(base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg'/>").decode()) == UNSUPPORTED
    assert checked_image("not base64!") == "the data is not valid base64"
    assert checked_image(None) == checked_image("") == "no image data"
    just_over = base64.b64encode(PNG[:16] + b"\0" * (MAX_IMAGE_BYTES - 15)).decode()
    assert checked_image(just_over) == "5.0 MB, over the 5.0 MB limit"
    assert checked_image(just_over[:-8] + "\n" + just_over[-8:]) == "5.0 MB, over the 5.0 MB limit"
    assert checked_image(base64.b64encode(PNG[:16] + b"\0" * (MAX_IMAGE_BYTES - 16)).decode()) == ImageBlock(
        base64.b64encode(PNG[:16] + b"\0" * (MAX_IMAGE_BYTES - 16)).decode(), "image/png"
    )  # the limit


def test_a_result_with_images_carries_them_and_notes_each():
    result = {
        "content": [
            {"type": "text", "text": "two pictures"},
            {"type": "image", "data": PNG_B64, "mimeType": "image/png"},
            {"type": "image", "data": "AAAA", "mimeType": "image/svg+xml"},
            {"type": "image", "data": GIF_B64, "mimeType": "image/gif"},
        ]
    }
    text = result_text(result)
    assert isinstance(text, ResultText)
    assert text == (
        "two pictures\n[image: image/png, attached]\n"
        f"[image: image/svg+xml, not sent: {UNSUPPORTED}]\n[image: image/gif, attached]"
    )
    plain, images = split_result(text)
    assert type(plain) is str and plain == text
    assert images == [ImageBlock(PNG_B64, "image/png"), ImageBlock(GIF_B64, "image/gif")]
    assert split_result("just text") == ("just text", [])
    assert type(result_text({"content": [{"type": "text", "text": "t"}]})) is str
    failed = result_text(
        {
            "isError": True,
            "content": [
                {"type": "text", "text": "no luck"},
                {"type": "image", "data": PNG_B64, "mimeType": "image/png"},
            ],
        }
    )
    assert type(failed) is str
    assert failed == "no luck\n[image: image/png, not sent: a failed call's result is sent as text]"


def test_a_tool_result_keeps_its_images_in_the_stored_shape():
    block = with_image()
    assert block_from_dict(block.to_dict()) == block
    assert "images" not in ToolResultBlock("c", "t", "x").to_dict()  # the usual shape is unchanged
    for bad in ("x", [{"type": "text", "text": "t"}], ["x"]):
        with pytest.raises(ValueError, match="'images' must be a list of image blocks"):
            block_from_dict({**block.to_dict(), "images": bad})


def test_the_log_stores_a_tool_results_images_by_hash_and_reads_them_back(tmp_path):
    message = Message("tool", [with_image()])
    line = stored_images.line(message, tmp_path)
    assert PNG_B64 not in line.decode() and b'"sha256"' in line
    assert [p.read_bytes() for p in tmp_path.iterdir()] == [PNG]
    assert Message.from_dict(stored_images.inline(json.loads(line), tmp_path)) == message
    for p in tmp_path.iterdir():
        p.unlink()
    gone = Message.from_dict(stored_images.inline(json.loads(line), tmp_path)).content[0]
    assert gone.images == [] and gone.content.startswith(ATTACHED + "\n[an image that is no longer stored (")


class Camera(BaseTool):
    name = "camera"

    def execute(self, args: dict, ctx: TurnContext) -> str:
        return ResultText("a red dot\n[image: image/png, attached]", [ImageBlock(PNG_B64, "image/png")])


def test_the_tool_call_runner_moves_the_images_into_the_result_block():
    events: list = []
    finished = run_tool_calls(
        ToolRegistry([Camera()]), [ToolUseBlock("call_1", "camera", "{}")], TurnContext(), events.append
    )
    block = finished.messages[0].tool_result_block()
    assert block == ToolResultBlock("call_1", "camera", ATTACHED, images=[ImageBlock(PNG_B64, "image/png")])
    assert type(block.content) is str and type(events[-1].result) is str  # the text alone, a plain str
    assert message_bytes(finished.messages[0]) > IMAGE_BYTES  # the context fitter counts the image


# --- the request builders ----------------------------------------------------------------------


def cfg(kind: str) -> AgentConfig:
    return AgentConfig(provider_name="fake", kind=kind, api_base="http://127.0.0.1:1", api_key="", model="m")


def test_anthropic_puts_the_images_in_the_tool_result():
    plain = ToolResultBlock("call_2", "fake__echo", "echo: hi")
    turns = anthropic.build_request(conversation(with_image(), plain), [], cfg("anthropic"))["messages"]
    results = turns[-1]["content"]
    assert results[0]["content"] == [
        {"type": "text", "text": ATTACHED},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
    ]
    assert results[1]["content"] == "echo: hi" and results[1]["tool_use_id"] == "call_2"


def test_chat_completions_sends_the_images_after_all_tool_messages_of_the_reply():
    two = with_image("call_3", "fake__two", ImageBlock(PNG_B64, "image/png"), ImageBlock(GIF_B64, "image/gif"))
    messages = conversation(
        with_image(), ToolResultBlock("call_2", "fake__echo", "echo: hi"), two, then=Message.assistant("I see a dot")
    )
    sent = openai.build_request(messages, [], cfg("openai"))["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "tool", "user", "assistant"]
    assert [m["content"] for m in sent[3:6]] == [ATTACHED, "echo: hi", ATTACHED]  # tool messages: text only
    assert sent[6]["content"] == [
        {"type": "text", "text": "[the image attached to the result of tool call call_1 (fake__picture)]"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        {"type": "text", "text": "[the 2 images attached to the result of tool call call_3 (fake__two)]"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/gif;base64,{GIF_B64}"}},
    ]
    last = openai.build_request(conversation(with_image()), [], cfg("openai"))["messages"]
    assert [m["role"] for m in last[-2:]] == ["tool", "user"]  # images of the latest results go too


def test_gemini_puts_inline_data_after_the_function_responses_of_the_turn():
    messages = conversation(
        with_image(), ToolResultBlock("call_2", "fake__echo", "echo: hi"), then=Message.assistant("I see a dot")
    )
    contents = gemini.build_request(messages, [], cfg("gemini"))["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user", "model"]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "fake__picture", "response": {"result": ATTACHED}}},
        {"functionResponse": {"name": "fake__echo", "response": {"result": "echo: hi"}}},
        {"text": "[the image attached to the result of the fake__picture call]"},
        {"inlineData": {"mimeType": "image/png", "data": PNG_B64}},
    ]


def test_results_without_images_are_sent_as_before():
    messages = conversation(ToolResultBlock("call_1", "fake__echo", "echo: hi"))
    assert openai.build_request(messages, [], cfg("openai"))["messages"][-1] == {
        "role": "tool",
        "content": "echo: hi",
        "tool_call_id": "call_1",
    }
    assert (
        anthropic.build_request(messages, [], cfg("anthropic"))["messages"][-1]["content"][0]["content"] == "echo: hi"
    )
    assert gemini.build_request(messages, [], cfg("gemini"))["contents"][-1]["parts"] == [
        {"functionResponse": {"name": "fake__echo", "response": {"result": "echo: hi"}}}
    ]


# --- end to end: openheim run, a real MCP server, each wire ------------------------------------


def tool_images(body: dict, kind: str) -> list[tuple[str, str]]:
    """(mime type, base64) of each image the request sends from a tool result, where that wire puts them."""
    if kind == "anthropic":
        return [
            (block["source"]["media_type"], block["source"]["data"])
            for turn in body["messages"]
            if turn["role"] == "user"
            for result in turn["content"]
            if result["type"] == "tool_result" and isinstance(result["content"], list)
            for block in result["content"]
            if block["type"] == "image"
        ]
    if kind == "gemini":
        return [
            (part["inlineData"]["mimeType"], part["inlineData"]["data"])
            for turn in body["contents"]
            if any("functionResponse" in p for p in turn["parts"])
            for part in turn["parts"]
            if "inlineData" in part
        ]
    messages = body["messages"]
    after_tools = [m for i, m in enumerate(messages) if m["role"] == "user" and i and messages[i - 1]["role"] == "tool"]
    assert all(isinstance(m["content"], str) for m in messages if m["role"] == "tool")
    return [
        tuple(part["image_url"]["url"].removeprefix("data:").split(";base64,"))
        for m in after_tools
        for part in m["content"]
        if part["type"] == "image_url"
    ]


def tool_texts(body: dict, kind: str) -> list[str]:
    """The text of each tool result in the request, in order."""
    if kind == "anthropic":
        return [
            r["content"] if isinstance(r["content"], str) else r["content"][0]["text"]
            for turn in body["messages"]
            for r in turn["content"]
            if r["type"] == "tool_result"
        ]
    if kind == "gemini":
        return [
            p["functionResponse"]["response"]["result"]
            for turn in body["contents"]
            for p in turn["parts"]
            if "functionResponse" in p
        ]
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("kind", ["anthropic", "openai", "gemini"])
def test_an_mcp_image_reaches_each_wire_and_a_too_large_one_is_a_note(kind, isolated_home, tmp_path):
    tag = new_tag()
    with fake_provider(kind, isolated_home, extra=toml_server("fake", tag)) as srv:
        srv.enqueue(
            Reply(
                tool_calls=[
                    ToolCall("fake__picture", {}, id="call_pic"),
                    ToolCall("fake__huge_picture", {}, id="call_huge"),
                ]
            ),
            Reply(text="A red dot."),
        )
        r = openheim("run", "look at the picture", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "A red dot.\n"
        body = srv.requests[1].body
        assert tool_images(body, kind) == [("image/png", PNG_B64)]
        assert tool_texts(body, kind) == [ATTACHED, TOO_BIG]
    assert wait_until(lambda: not pids_with(tag), timeout=5)


def test_a_resumed_session_sends_the_tool_image_again(isolated_home, tmp_path):
    tag = new_tag()
    with fake_provider("openai_compatible", isolated_home, extra=toml_server("fake", tag)) as srv:
        srv.enqueue(
            Reply(tool_calls=[ToolCall("fake__picture", {}, id="call_pic")]),
            Reply(text="A red dot."),
            Reply(text="Still a red dot."),
        )
        r = openheim("run", "-o", "json", "look at the picture", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        session = json.loads(r.stdout)["session_id"]
        log = (isolated_home / "history" / f"{session}.jsonl").read_text()
        assert PNG_B64 not in log and '"images":[{"type":"image","mime_type":"image/png","sha256"' in log
        r = openheim("run", "-s", session, "and now?", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "Still a red dot.\n"
        resumed = srv.requests[2].body
        assert tool_images(resumed, "openai") == [("image/png", PNG_B64)]
        assert [m["role"] for m in resumed["messages"][-5:]] == ["assistant", "tool", "user", "assistant", "user"]
    assert wait_until(lambda: not pids_with(tag), timeout=5)
