"""`openheim run --output-schema` end to end on every wire: the native mode in the request (OpenAI
response_format, Gemini responseSchema) or the schema in the system prompt (Anthropic), the answer validated
locally, one repair round, exit 7 when it still does not match."""

from __future__ import annotations

import json

import pytest
from cli_helpers import fake_provider, openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

KINDS = {"openai": "openai", "openai_compatible": "openai", "anthropic": "anthropic", "gemini": "gemini"}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
    "required": ["city", "temp"],
    "additionalProperties": False,
}
GOOD = '{"city": "Paris", "temp": 18}'


@pytest.fixture(params=sorted(KINDS))
def kind(request):
    return request.param


@pytest.fixture
def srv(kind, isolated_home):
    with fake_provider(kind, isolated_home) as server:
        yield server


@pytest.fixture
def schema_file(tmp_path):
    path = tmp_path / "weather.json"
    path.write_text(json.dumps(SCHEMA))
    return path


def _system_text(kind: str, body: dict) -> str:
    if kind == "anthropic":
        system = body.get("system")
        return system if isinstance(system, str) else "".join(b.get("text", "") for b in system or [])
    if kind == "gemini":
        return "".join(p.get("text", "") for p in body.get("systemInstruction", {}).get("parts", []))
    return "".join(m["content"] for m in body["messages"] if m["role"] == "system")


def _assert_schema_sent(kind: str, body: dict) -> None:
    """The native mode where the wire has one; the schema in the system prompt otherwise."""
    if KINDS[kind] == "openai":
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "weather", "schema": SCHEMA, "strict": True},
        }
        assert "JSON Schema" not in _system_text(kind, body)
    elif kind == "gemini":
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        assert config["responseSchema"] == {
            "type": "object",
            "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
            "required": ["city", "temp"],
        }
        assert "JSON Schema" not in _system_text(kind, body)
    else:
        assert "response_format" not in body and "output_config" not in body
        system = _system_text(kind, body)
        assert "reply with only a JSON value" in system and json.dumps(SCHEMA) in system


def _user_texts(kind: str, body: dict) -> list[str]:
    if kind == "gemini":
        return ["".join(p.get("text", "") for p in c["parts"]) for c in body["contents"] if c["role"] == "user"]
    out = []
    for m in body["messages"]:
        if m["role"] == "user":
            content = m["content"]
            out.append(content if isinstance(content, str) else "".join(b.get("text", "") for b in content))
    return out


def test_valid_answer_is_structured(kind, srv, schema_file, tmp_path):
    srv.enqueue(Reply(text=GOOD))
    r = openheim("run", "-o", "json", "--output-schema", str(schema_file), "weather in Paris?", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["structured"] == {"city": "Paris", "temp": 18} and obj["stop_reason"] == "end_turn"
    assert len(srv.requests) == 1
    _assert_schema_sent(kind, srv.requests[0].body)


def test_wrong_answer_is_repaired_once(kind, srv, schema_file, tmp_path):
    srv.enqueue(Reply(text='{"city": "Paris", "temp": "warm"}'), Reply(text=GOOD))
    r = openheim("run", "--output-schema", str(schema_file), "weather in Paris?", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"city": "Paris", "temp": 18}  # text mode: only the validated JSON
    assert r.stdout == '{"city": "Paris", "temp": 18}\n' and r.stderr == ""
    assert len(srv.requests) == 2
    repair = _user_texts(kind, srv.requests[1].body)[-1]
    assert "at $.temp: expected integer, got string" in repair and "corrected JSON" in repair
    _assert_schema_sent(kind, srv.requests[1].body)


def test_wrong_twice_exits_7_with_the_error(kind, srv, schema_file, tmp_path, isolated_home):
    srv.enqueue(Reply(text="It is sunny in Paris."), Reply(text='{"city": "Paris"}'))
    r = openheim("run", "-o", "json", "--output-schema", str(schema_file), "weather?", cwd=tmp_path)
    assert r.returncode == 7, r.stderr
    obj = json.loads(r.stdout)
    assert obj["stop_reason"] == "invalid_output" and obj["structured"] is None
    assert obj["output_error"] == "the answer does not match the output schema: at $: missing required property 'temp'"
    assert r.stderr.count("\n") == 1 and "missing required property 'temp'" in r.stderr
    repair = _user_texts(kind, srv.requests[1].body)[-1]
    assert "the answer is not valid JSON" in repair
    # the history holds the repair round like any message, and the session goes on
    srv.enqueue(Reply(text="fine"))
    r2 = openheim("run", "--session", obj["session_id"], "thanks", cwd=tmp_path)
    assert r2.returncode == 0 and r2.stdout == "fine\n"
    assert _user_texts(kind, srv.requests[2].body)[-2:] == [repair, "thanks"]


def test_tools_still_run_before_the_structured_answer(srv, schema_file, tmp_path):
    (tmp_path / "w.txt").write_text("Paris 18\n")
    srv.enqueue(Reply(tool_calls=[ToolCall("read_file", {"path": "w.txt"})]), Reply(text=GOOD))
    r = openheim("run", "-o", "stream-json", "--output-schema", str(schema_file), "read w.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["type"] == "result" and last["structured"] == {"city": "Paris", "temp": 18}
    assert last["iterations"] == 2


@pytest.mark.parametrize("kind", ["openai"])
def test_schema_outside_strict_mode_is_sent_with_strict_false(kind, srv, tmp_path):
    path = tmp_path / "loose.json"
    path.write_text(
        json.dumps({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}})
    )
    srv.enqueue(Reply(text='{"tags": ["a"]}'))
    r = openheim("run", "-o", "json", "--output-schema", str(path), "tags?", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert srv.requests[0].body["response_format"]["json_schema"]["strict"] is False


@pytest.mark.parametrize("kind", ["openai"])
@pytest.mark.parametrize(
    "content, message",
    [
        (None, "cannot read the output schema"),
        ("{not json", "is not valid JSON (Expecting property name enclosed in double quotes at line 1 column 2)"),
        ('["a"]', "the output schema must be a JSON object"),
        ('{"type": "thing"}', "#/type: must be one of"),
        ('{"type": "object", "if": {}}', "#/if: the keyword 'if' is not supported"),
    ],
)
def test_unusable_schema_file_is_one_line_exit_2(kind, srv, tmp_path, content, message):
    path = tmp_path / "schema.json"
    if content is not None:
        path.write_text(content)
    r = openheim("run", "--output-schema", str(path), "hi", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr
    assert srv.requests == []


def test_library_prompt_takes_an_output_schema(isolated_home, tmp_path):
    from openheim import OpenheimClient
    from openheim.core.models import StopReason

    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        server.enqueue(Reply(text="nope"), Reply(text=GOOD))
        with OpenheimClient.builder().config_path(isolated_home / "config.toml").build() as client:
            result = client.new_session(tmp_path).prompt("weather?", output_schema=SCHEMA)
        assert result.stop_reason is StopReason.END_TURN
        assert result.structured == {"city": "Paris", "temp": 18}
        assert server.requests[0].body["response_format"]["json_schema"]["name"] == "output"
