"""`openheim memory …` through click's CliRunner with a factory pointing at a temp database."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from memory_fakes import FakeEmbedder

from openheim.commands.memory import memory
from openheim.memory.long_term import LongTermMemory


@pytest.fixture
def db(tmp_path):
    return tmp_path / "memory.db"


@pytest.fixture
def run(db):
    embedder = {"value": None}

    def invoke(*args: str, input: str | None = None, embed: FakeEmbedder | None = None):
        factory = lambda: LongTermMemory(db, embed or embedder["value"])
        return CliRunner().invoke(memory, list(args), obj={"ltm_factory": factory}, input=input)

    return invoke


def test_add_list_and_json(run):
    assert run("add", "the user prefers tabs").output == "Remembered as memory #1.\n"
    out = run("add", "second note", "--json")
    assert json.loads(out.stdout) == {"id": 2}
    listed = run("list")
    assert listed.exit_code == 0
    lines = listed.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("#1  ") and lines[0].endswith("  the user prefers tabs")
    data = json.loads(run("list", "--json").stdout)
    assert [d["id"] for d in data] == [1, 2]
    assert set(data[0]) == {"id", "content", "created_at"} and data[1]["content"] == "second note"
    assert json.loads(run("list", "--json", "--limit", "1", "--offset", "1").stdout)[0]["id"] == 2


def test_list_of_an_empty_store(run):
    assert run("list").stdout == "Long-term memory is empty.\n"
    assert json.loads(run("list", "--json").stdout) == []


def test_list_preview_is_one_short_line(run):
    run("add", "first line\nsecond line")
    run("add", "x" * 300)
    lines = run("list").stdout.splitlines()
    assert lines[0].endswith("first line…")
    assert len(lines[1]) < 130 and lines[1].endswith("…")


def test_add_reads_stdin_and_validates(run):
    assert run("add", "-", input="from stdin\n").stdout == "Remembered as memory #1.\n"
    empty = run("add", "   ")
    assert empty.exit_code == 2 and "the note is empty" in empty.output
    long = run("add", "y" * 4001)
    assert long.exit_code == 2 and "at most 4000" in long.output
    assert json.loads(run("list", "--json").stdout)[0]["content"] == "from stdin"


def test_search_text_and_json(run):
    assert run("search", "x").stdout == "Long-term memory is empty; nothing has been remembered yet.\n"
    run("add", "deploys happen on Tuesdays")
    run("add", "the editor is vim")
    out = run("search", "tuesdays")
    assert out.exit_code == 0
    assert out.stdout.startswith("Found 1 memory:\n\n[#1] ") and "deploys happen on Tuesdays" in out.stdout
    assert "keyword search:" in out.stderr
    data = json.loads(run("search", "tuesdays vim", "--json", "-k", "1").stdout)
    assert data["mode"] == "keyword" and data["query"] == "tuesdays vim"
    assert len(data["results"]) == 1
    assert set(data["results"][0]) == {"id", "content", "created_at", "score", "score_kind"}
    assert data["results"][0]["score_kind"] == "rank"
    assert run("search", "nothing").stdout == "No relevant memories found.\n"


def test_semantic_search_json(run):
    embed = FakeEmbedder()
    run("add", "my car is red", embed=embed)
    data = json.loads(run("search", "automobile", "--json", embed=embed).stdout)
    assert data["mode"] == "semantic" and data["results"][0]["score_kind"] == "similarity"


def test_edit_and_forget(run):
    run("add", "office in Berlin")
    assert run("edit", "1", "office in Lisbon").stdout == "Updated memory #1.\n"
    assert json.loads(run("edit", "1", "office in Porto", "--json").stdout) == {"id": 1, "updated": True}
    missing = run("edit", "9", "x")
    assert missing.exit_code == 1 and missing.output == "Error: No memory #9 exists; nothing to edit.\n"
    assert json.loads(run("forget", "1", "--json").stdout) == {"id": 1, "forgotten": True}
    gone = run("forget", "1")
    assert gone.exit_code == 1 and gone.output == "Error: No memory #1 exists; nothing to forget.\n"
    bad = run("forget", "one")
    assert bad.exit_code == 2 and "is not a valid integer" in bad.output


def test_stats_text_and_json(run, db):
    run("add", "a")
    text = run("stats").stdout
    assert "Notes:           1" in text and "keyword search" in text and str(db) in text
    data = json.loads(run("stats", "--json").stdout)
    assert data["memories"] == 1 and data["embedded"] == 0 and data["path"] == str(db)
    assert data["embedding_model"] is None and data["vectors_available"] is True


def test_reembed(run):
    embed = FakeEmbedder()
    for i in range(70):
        run("add", f"note {i}")
    out = run("reembed", embed=embed)
    assert out.exit_code == 0, out.output
    assert "Re-embedded 70 notes." in out.stdout
    assert "Re-embedding notes" in out.stderr  # click's progress bar
    data = json.loads(run("reembed", "--json", embed=embed).stdout)
    assert data == {"embedded": 70, "skipped": []}
    assert json.loads(run("stats", "--json", embed=embed).stdout)["embedded"] == 70


def test_reembed_errors_are_one_line(run):
    run("add", "a")
    out = run("reembed")
    assert out.exit_code == 2  # a configuration problem, as in the main CLI
    assert out.output.startswith("Error: Config error: no embedding provider is configured")
    assert out.output.count("\n") == 1
    down = FakeEmbedder()
    down.fail = True
    out = run("reembed", "--json", embed=down)
    assert out.exit_code == 1 and "connection refused" in out.output


def test_missing_factory_is_a_clear_error():
    out = CliRunner().invoke(memory, ["list"])
    assert out.exit_code == 1 and "not set up" in out.output


def test_factory_errors_are_one_line(tmp_path):
    (tmp_path / "dir.db").mkdir()
    out = CliRunner().invoke(memory, ["list"], obj={"ltm_factory": lambda: LongTermMemory(tmp_path / "dir.db")})
    assert out.exit_code == 1 and out.output.startswith("Error: Database error: cannot open")


def test_multi_line_errors_become_one_line(tmp_path):
    from openheim.errors import HttpError

    def factory():
        raise HttpError(500, '{\n  "error": "boom"\n}')

    out = CliRunner().invoke(memory, ["stats"], obj={"ltm_factory": factory})
    assert out.exit_code == 1 and out.output == 'Error: HTTP 500: { "error": "boom" }\n'


# --- end to end through `python -m openheim memory …` with [memory] pointing at a fake server ----


def _openheim(cfg, *args):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, "-m", "openheim", "--config", str(cfg), "memory", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _config(tmp_path, server_url: str, kind: str = "openai_compatible"):
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"""
default_provider = "local"

[providers.local]
kind = "{kind}"
api_base = "{server_url}/v1"
default_model = "chat"
models = []

[memory]
embedding_provider = "local"
embedding_model = "embed-a"
db_path = "{tmp_path / "mem.db"}"
""")
    return cfg


def test_semantic_memory_end_to_end(tmp_path):
    from memory_fakes import EmbeddingsServer

    with EmbeddingsServer() as server:
        cfg = _config(tmp_path, server.url)
        assert _openheim(cfg, "add", "my car is a green van").stdout == "Remembered as memory #1.\n"
        _openheim(cfg, "add", "lunch is at noon")
        found = _openheim(cfg, "search", "automobile", "--json")
        assert found.returncode == 0, found.stderr
        data = json.loads(found.stdout)
        assert data["mode"] == "semantic" and data["results"][0]["id"] == 1
        stats = json.loads(_openheim(cfg, "stats", "--json").stdout)
        assert (stats["embedded"], stats["model"], stats["embedding_model"]) == (2, "embed-a", "embed-a")
        assert json.loads(_openheim(cfg, "reembed", "--json").stdout) == {"embedded": 2, "skipped": []}
        assert all(r["path"] == "/v1/embeddings" for r in server.requests)


def test_anthropic_embedding_provider_is_refused(tmp_path):
    out = _openheim(_config(tmp_path, "https://api.anthropic.com", kind="anthropic"), "list")
    assert out.returncode == 2
    assert "is an Anthropic provider, which has no embeddings API" in out.stderr
    assert out.stderr.count("\n") == 1


def test_reembed_counts_are_grammatical(tmp_path):
    from memory_fakes import EmbeddingsServer

    with EmbeddingsServer() as server:
        cfg = _config(tmp_path, server.url)
        _openheim(cfg, "add", "my car is a green van")
        _openheim(cfg, "add", "lunch is at noon")
        server.short = True
        out = _openheim(cfg, "reembed")
        assert out.returncode == 1
        assert "embeddings provider returned 1 vector for 2 inputs" in out.stderr, out.stderr
