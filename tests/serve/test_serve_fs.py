"""The `fs` channel of `/ws`: every operation, ids echoed, and every sandbox refusal of the file tools."""

from __future__ import annotations

import os
import queue

import pytest


@pytest.fixture
def fs(ws):
    assert ws.fs.get(timeout=5)["type"] == "connected"
    return ws


@pytest.fixture
def outside(project):
    """A directory next to the work dir with a secret, and links from inside the work dir to it."""
    out = project.parent / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("top secret")
    (project / "inside.txt").write_text("inside")
    (project / "sub").mkdir()
    os.symlink(out, project / "link_out")
    os.symlink(out / "secret.txt", project / "secret_link")
    os.symlink(project / "missing-target", project / "dangling")
    return out


def test_write_read_list_mkdir_rename_delete(fs, project):
    assert fs.fs_call(action="write", path="docs/a/note.md", content="héllo\n", id=1) == {
        "type": "write_success",
        "path": "docs/a/note.md",
        "id": 1,
    }
    assert (project / "docs/a/note.md").read_text() == "héllo\n"
    assert fs.fs_call(action="read", path="docs/a/note.md", id="r") == {
        "type": "file_content",
        "path": "docs/a/note.md",
        "content": "héllo\n",
        "id": "r",
    }
    listing = fs.fs_call(action="list", path="docs", id={"n": [1]})
    assert listing["type"] == "file_list" and listing["id"] == {"n": [1]}
    assert [(e["name"], e["is_dir"]) for e in listing["entries"]] == [("a", True)]
    deep = fs.fs_call(action="list", path=str(project / "docs"), recursive=True)["entries"]
    assert [e["path"] for e in deep] == [str(project / "docs/a"), str(project / "docs/a/note.md")]
    note = deep[1]
    assert note["size"] == len("héllo\n".encode()) and isinstance(note["modified"], int) and not note["is_dir"]
    assert "size" not in deep[0]
    assert fs.fs_call(action="mkdir", path="x/y/z") == {"type": "mkdir_success", "path": "x/y/z"}
    assert (project / "x/y/z").is_dir()
    assert fs.fs_call(action="rename", **{"from": "docs/a/note.md", "to": "x/note.md"}, id=None) == {
        "type": "rename_success",
        "from": "docs/a/note.md",
        "to": "x/note.md",
        "id": None,
    }
    assert (project / "x/note.md").read_text() == "héllo\n"
    assert fs.fs_call(action="delete", path="x/note.md")["type"] == "delete_success"
    assert fs.fs_call(action="delete", path="x")["type"] == "delete_success"
    assert not (project / "x").exists()
    assert fs.fs.empty() and fs.system.empty()


def test_delete_of_a_link_removes_the_link_not_its_target(fs, project, outside):
    assert fs.fs_call(action="delete", path="link_out")["type"] == "delete_success"
    assert not os.path.lexists(project / "link_out")
    assert (outside / "secret.txt").read_text() == "top secret"


OUTSIDE = "is outside the work directory"
ITSELF = "is the work directory itself"
REFUSALS = [
    ({"action": "read", "path": "../outside/secret.txt"}, OUTSIDE),
    ({"action": "read", "path": "/etc/hostname"}, OUTSIDE),
    ({"action": "read", "path": "x/../../outside/secret.txt"}, OUTSIDE),
    ({"action": "read", "path": "link_out/secret.txt"}, OUTSIDE),
    ({"action": "read", "path": "secret_link"}, OUTSIDE),
    ({"action": "read", "path": "dangling"}, "dangling symlink"),
    ({"action": "read", "path": "inside\0.txt"}, "NUL byte"),
    ({"action": "read", "path": "a" * 300}, "longer than 255 bytes"),
    ({"action": "write", "path": "../outside/evil.txt", "content": "x"}, OUTSIDE),
    ({"action": "write", "path": "link_out/evil.txt", "content": "x"}, OUTSIDE),
    ({"action": "write", "path": "secret_link", "content": "overwritten"}, OUTSIDE),
    ({"action": "mkdir", "path": "../outside/newdir"}, OUTSIDE),
    ({"action": "mkdir", "path": "link_out/newdir"}, OUTSIDE),
    ({"action": "list", "path": ".."}, OUTSIDE),
    ({"action": "list", "path": "link_out"}, OUTSIDE),
    ({"action": "watch", "path": "../outside"}, OUTSIDE),
    ({"action": "delete", "path": "."}, ITSELF),
    ({"action": "delete", "path": ""}, ITSELF),
    ({"action": "delete", "path": "sub/.."}, ITSELF),
    ({"action": "delete", "path": "../outside/secret.txt"}, OUTSIDE),
    ({"action": "delete", "path": "link_out/secret.txt"}, OUTSIDE),
    ({"action": "delete", "path": "/"}, OUTSIDE),
    ({"action": "rename", "from": "inside.txt", "to": "../outside/moved.txt"}, OUTSIDE),
    ({"action": "rename", "from": "inside.txt", "to": "link_out/moved.txt"}, OUTSIDE),
    ({"action": "rename", "from": "../outside/secret.txt", "to": "stolen.txt"}, OUTSIDE),
    ({"action": "rename", "from": "sub", "to": "."}, ITSELF),
    ({"action": "rename", "from": ".", "to": "elsewhere"}, ITSELF),
]


@pytest.mark.parametrize(
    "request_, expected", REFUSALS, ids=[f"{r['action']}:{r.get('path', r.get('from'))!r}"[:60] for r, _ in REFUSALS]
)
def test_every_sandbox_refusal_of_the_file_tools(fs, project, outside, request_, expected):
    before = sorted(p.name for p in outside.iterdir())
    reply = fs.fs_call(**request_, id=42)
    assert reply["type"] == "error" and reply["id"] == 42, reply
    assert expected in reply["message"], reply
    if expected == OUTSIDE:
        assert reply["message"].startswith("Tool execution error: path ")
        assert f"'{project}'" in reply["message"]  # names the work directory
    assert sorted(p.name for p in outside.iterdir()) == before
    assert (outside / "secret.txt").read_text() == "top secret"
    assert (project / "inside.txt").read_text() == "inside" and (project / "sub").is_dir()


def test_sandbox_messages_are_the_file_tools_own(project, outside):
    """The channel refuses with exactly the error the file tools raise for the same path."""
    from openheim.errors import ToolExecutionError
    from openheim.serve.fs_channel import FsChannel
    from openheim.tools.sandbox import validate_path

    sent = []
    channel = FsChannel(project, sent.append)
    for path in ("../outside/secret.txt", "link_out/x", "dangling"):
        with pytest.raises(ToolExecutionError) as refused:
            validate_path(path, project)
        channel.handle({"action": "read", "path": path})
        assert sent[-1] == {"type": "error", "message": str(refused.value)}


@pytest.mark.parametrize(
    "data, message",
    [
        ({"path": "a"}, "Invalid payload: missing field `action`"),
        ({"action": "chmod", "path": "a"}, "Invalid payload: unknown action `chmod`, expected one of `watch`"),
        ({"action": "read"}, "Invalid payload: missing field `path`"),
        ({"action": "read", "path": 7}, "Invalid payload: field `path` must be a string"),
        ({"action": "write", "path": "a"}, "Invalid payload: missing field `content`"),
        ({"action": "rename", "from": "a"}, "Invalid payload: missing field `to`"),
        (
            {"action": "list", "path": ".", "recursive": "yes"},
            "Invalid payload: field `recursive` must be true or false",
        ),
        ("read a", "Invalid payload: expected an object"),
        (None, "Invalid payload: expected an object"),
    ],
)
def test_malformed_requests_are_answered_with_one_error(fs, data, message):
    fs.send_fs(data)
    reply = fs.fs.get(timeout=5)
    assert reply["type"] == "error" and reply["message"].startswith(message), reply


def test_io_failures_are_errors_not_hangs(fs, project):
    (project / "blob.bin").write_bytes(b"\xff\xfe\x00binary")
    (project / "plain").write_text("x")
    os.mkfifo(project / "pipe")
    cases = [
        ({"action": "read", "path": "missing.txt"}, "Failed to read: No such file or directory"),
        ({"action": "read", "path": "sub"}, "Failed to read: 'sub' is not a regular file"),
        ({"action": "read", "path": "pipe"}, "Failed to read: 'pipe' is not a regular file"),
        ({"action": "read", "path": "blob.bin"}, "Failed to read: 'blob.bin' is not UTF-8 text"),
        ({"action": "write", "path": "plain/child.txt", "content": "x"}, "Failed to create dirs:"),
        ({"action": "write", "path": "sub", "content": "x"}, "Failed to write: Is a directory"),
        ({"action": "mkdir", "path": "plain"}, "Failed to mkdir: File exists"),
        ({"action": "delete", "path": "missing"}, "Failed to delete: No such file or directory"),
        ({"action": "rename", "from": "missing", "to": "other"}, "Failed to rename: No such file or directory"),
        ({"action": "list", "path": "plain"}, "Failed to list: 'plain' is not a directory"),
        ({"action": "watch", "path": "plain"}, "Invalid directory: plain"),
    ]
    (project / "sub").mkdir(exist_ok=True)
    for request, message in cases:
        reply = fs.fs_call(**request)
        assert reply == {"type": "error", "message": reply["message"]} and reply["message"].startswith(message), (
            request,
            reply,
        )


def _events(fs, count: int, timeout: float = 5.0) -> list[dict]:
    got = []
    while len(got) < count:
        got.append(fs.fs.get(timeout=timeout))
    return got


def test_watch_reports_creates_modifications_and_removals(fs, project):
    assert fs.fs_call(action="watch", path=".", id="w") == {"type": "watching", "path": ".", "id": "w"}
    (project / "new.txt").write_text("one")
    created = _events(fs, 1)[0]
    assert created == {"type": "fs_event", "event_kind": "create", "paths": [str(project / "new.txt")]}
    (project / "new.txt").write_text("one and two")
    assert _events(fs, 1)[0] == {"type": "fs_event", "event_kind": "modify", "paths": [str(project / "new.txt")]}
    (project / "new.txt").unlink()
    assert _events(fs, 1)[0] == {"type": "fs_event", "event_kind": "remove", "paths": [str(project / "new.txt")]}
    assert fs.fs_call(action="unwatch", id=2) == {"type": "unwatched", "id": 2}
    (project / "quiet.txt").write_text("unwatched")
    with pytest.raises(queue.Empty):
        fs.fs.get(timeout=0.5)


def test_a_new_watch_replaces_the_old_one(fs, project):
    (project / "a").mkdir()
    (project / "b").mkdir()
    assert fs.fs_call(action="watch", path="a")["type"] == "watching"
    assert fs.fs_call(action="watch", path="b")["type"] == "watching"
    (project / "a" / "ignored.txt").write_text("x")
    (project / "b" / "seen.txt").write_text("x")
    event = _events(fs, 1)[0]
    assert event["paths"] == [str(project / "b" / "seen.txt")]
    with pytest.raises(queue.Empty):
        fs.fs.get(timeout=0.5)
