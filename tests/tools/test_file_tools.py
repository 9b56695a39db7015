"""read_file, write_file, edit_file and list_dir: formats, caps and messages of reference §3.7."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openheim.core.turn_context import CancelToken, TurnContext
from openheim.errors import InvalidArgument, ParseError, ToolExecutionError
from openheim.tools.edit_file import EditFileTool
from openheim.tools.list_dir import ListDirTool
from openheim.tools.read_file import CAP, ReadFileTool, page_buffer
from openheim.tools.write_file import WriteFileTool


@pytest.fixture
def ctx(tmp_path: Path) -> TurnContext:
    return TurnContext(work_dir=tmp_path, cwd=tmp_path)


def read(ctx: TurnContext, **args) -> str:
    return ReadFileTool().execute(args, ctx)


def lines(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


# --- read_file ----------------------------------------------------------------


def test_read_whole_small_file_has_no_note(ctx, tmp_path):
    (tmp_path / "a.txt").write_text(lines(3))
    assert read(ctx, path="a.txt") == lines(3)


def test_read_page_with_more_lines_tells_how_to_read_on(ctx, tmp_path):
    (tmp_path / "a.txt").write_text(lines(10))
    out = read(ctx, path="a.txt", offset=3, limit=2)
    assert out == "line 3\nline 4\n[lines 3–4 of 10 shown; call again with offset=5 to read on]"


def test_read_exactly_to_the_end_gives_no_note(ctx, tmp_path):
    (tmp_path / "a.txt").write_text(lines(10))
    assert read(ctx, path="a.txt", offset=9, limit=2) == "line 9\nline 10\n"
    assert read(ctx, path="a.txt", offset=9, limit=5) == "line 9\nline 10\n"


def test_read_last_line_without_newline(ctx, tmp_path):
    (tmp_path / "a.txt").write_text("a\nb\nc")
    note = "[lines 2–2 of 3 shown; call again with offset=3 to read on]"
    assert read(ctx, path="a.txt", offset=2, limit=1) == "b\n" + note
    assert read(ctx, path="a.txt", offset=3) == "c"


def test_read_offset_past_the_end(ctx, tmp_path):
    (tmp_path / "a.txt").write_text(lines(4))
    assert read(ctx, path="a.txt", offset=9) == "[offset 9 is past the end of the file, which has 4 lines]"
    assert read(ctx, path="a.txt", offset=5) == "[offset 5 is past the end of the file, which has 4 lines]"


def test_read_empty_file(ctx, tmp_path):
    (tmp_path / "empty.txt").write_text("")
    assert read(ctx, path="empty.txt") == ""
    assert read(ctx, path="empty.txt", offset=2) == "[offset 2 is past the end of the file, which has 0 lines]"


def test_read_byte_cap_stops_at_whole_lines(ctx, tmp_path):
    line = "x" * 99 + "\n"
    (tmp_path / "big.txt").write_text(line * 2000)
    out = read(ctx, path="big.txt")
    shown = CAP // 100
    assert out == line * shown + f"[lines 1–{shown} of 2000 shown; call again with offset={shown + 1} to read on]"
    assert read(ctx, path="big.txt", offset=shown + 1, limit=1).startswith(line)


def test_read_overlong_first_line_is_cut_at_a_character_boundary(ctx, tmp_path):
    (tmp_path / "long.txt").write_text("é" * CAP + "\nsecond\n")
    out = read(ctx, path="long.txt")
    head, note = out.rsplit("\n", 1)
    assert len(head.encode()) <= CAP and set(head) == {"é"}
    assert note == (
        f"[line 1 of 2 is longer than {CAP} bytes; only its start is shown; "
        "call again with offset=2 for the lines after it]"
    )


def test_read_overlong_last_line_has_no_call_again(ctx, tmp_path):
    (tmp_path / "long.txt").write_text("a\n" + "b" * (CAP + 10))
    out = read(ctx, path="long.txt", offset=2)
    assert out.endswith(f"\n[line 2 of 2 is longer than {CAP} bytes; only its start is shown]")


def test_read_binary_is_refused(ctx, tmp_path):
    (tmp_path / "bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    with pytest.raises(ToolExecutionError, match="the file is not valid UTF-8 text"):
        read(ctx, path="bin")


@pytest.mark.parametrize("args", [{"offset": 0}, {"limit": 0}])
def test_read_zero_offset_or_limit(ctx, tmp_path, args):
    (tmp_path / "a.txt").write_text("a\n")
    with pytest.raises(InvalidArgument, match="offset and limit must be at least 1"):
        read(ctx, path="a.txt", **args)


def test_read_null_offset_means_unset(ctx, tmp_path):
    (tmp_path / "a.txt").write_text("a\nb\n")
    assert read(ctx, path="a.txt", offset=None, limit=None) == "a\nb\n"


def test_read_argument_errors(ctx):
    with pytest.raises(ParseError, match="failed to parse arguments: missing field `path`"):
        ReadFileTool().execute({}, ctx)
    with pytest.raises(ParseError, match="expected non-empty text, got an empty string"):
        ReadFileTool().execute({"path": "  "}, ctx)
    with pytest.raises(ParseError, match=r"invalid type: integer `5`, expected a string"):
        ReadFileTool().execute({"path": 5}, ctx)
    with pytest.raises(ParseError, match=r"invalid type: string \"x\", expected an integer"):
        ReadFileTool().execute({"path": "a", "offset": "x"}, ctx)


def test_read_missing_file_and_directory(ctx, tmp_path):
    with pytest.raises(ToolExecutionError, match="not found"):
        read(ctx, path="nope.txt")
    (tmp_path / "d").mkdir()
    with pytest.raises(ToolExecutionError, match="is a directory"):
        read(ctx, path="d")


def test_read_cancelled(ctx, tmp_path):
    (tmp_path / "a.txt").write_text("a\n")
    ctx.cancel.cancel()
    with pytest.raises(ToolExecutionError, match="file read cancelled"):
        read(ctx, path="a.txt")


def test_page_buffer_unknown_total_omits_of(monkeypatch):
    monkeypatch.setattr("openheim.tools.read_file.SCAN_LIMIT", 4)
    assert page_buffer(b"a\nb\nc\n", 1, 1) == "a\n[lines 1–1 shown; call again with offset=2 to read on]"
    assert page_buffer(b"a\nb\nc\n", 9, None) == "[nothing at offset 9]"
    assert page_buffer(b"a\n" + b"x" * 10, 2, None).startswith("x" * 10)


class FakeClient:
    """A client that can read and write: the tools must use it and not the disk."""

    can_read = True
    can_write = True
    can_run_commands = False

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.calls: list[tuple] = []

    def read_text_file(self, path, line, limit, cancel):
        self.calls.append(("read", str(path), line, limit))
        text = self.files[str(path)]
        rows = text.splitlines(keepends=True)[(line or 1) - 1 :]
        return "".join(rows[:limit] if limit else rows)

    def write_text_file(self, path, content, cancel):
        self.calls.append(("write", str(path)))
        self.files[str(path)] = content


def test_client_io_is_used_when_capable(tmp_path):
    target = str(tmp_path.resolve() / "buf.txt")
    client = FakeClient({target: "unsaved\nbuffer\n"})
    ctx = TurnContext(work_dir=tmp_path, cwd=tmp_path, client_io=client)
    assert read(ctx, path="buf.txt", offset=2) == "buffer\n"
    assert client.calls[0] == ("read", target, 2, None)
    assert read(ctx, path="buf.txt", offset=5) == "[nothing at offset 5]"
    EditFileTool().execute({"path": "buf.txt", "old_string": "unsaved", "new_string": "saved"}, ctx)
    assert client.files[target] == "saved\nbuffer\n"
    assert not (tmp_path / "buf.txt").exists()


def test_client_text_over_the_cap_gets_a_note_without_total(tmp_path):
    target = str(tmp_path.resolve() / "big.txt")
    client = FakeClient({target: ("y" * 99 + "\n") * 2000})
    ctx = TurnContext(work_dir=tmp_path, cwd=tmp_path, client_io=client)
    assert read(ctx, path="big.txt").endswith("[lines 1–1024 shown; call again with offset=1025 to read on]")


def test_client_without_capabilities_falls_back_to_disk(tmp_path):
    class Incapable(FakeClient):
        can_read = False
        can_write = False

    client = Incapable({})
    ctx = TurnContext(work_dir=tmp_path, cwd=tmp_path, client_io=client)
    WriteFileTool().execute({"path": "d.txt", "content": "disk"}, ctx)
    assert read(ctx, path="d.txt") == "disk"
    assert client.calls == []


# --- write_file -----------------------------------------------------------------


def test_write_creates_parents_and_overwrites(ctx, tmp_path):
    out = WriteFileTool().execute({"path": "a/b/c.txt", "content": "one"}, ctx)
    assert out == f"Successfully wrote to {tmp_path.resolve() / 'a/b/c.txt'}"
    WriteFileTool().execute({"path": "a/b/c.txt", "content": "two\r\n"}, ctx)
    assert (tmp_path / "a/b/c.txt").read_bytes() == b"two\r\n"


def test_write_empty_content_is_allowed_but_missing_is_not(ctx, tmp_path):
    WriteFileTool().execute({"path": "e.txt", "content": ""}, ctx)
    assert (tmp_path / "e.txt").read_text() == ""
    with pytest.raises(ParseError, match="missing field `content`"):
        WriteFileTool().execute({"path": "e.txt"}, ctx)


def test_write_cancelled_writes_nothing(ctx, tmp_path):
    ctx.cancel.cancel()
    with pytest.raises(ToolExecutionError, match="file write cancelled"):
        WriteFileTool().execute({"path": "x.txt", "content": "x"}, ctx)
    assert not (tmp_path / "x.txt").exists()


def test_write_onto_a_directory_is_an_error(ctx, tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(ToolExecutionError, match="is a directory"):
        WriteFileTool().execute({"path": "d", "content": "x"}, ctx)


# --- edit_file ------------------------------------------------------------------


def edit(ctx, **args) -> str:
    return EditFileTool().execute({"path": "f.txt", **args}, ctx)


def test_edit_unique_match(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("alpha beta gamma\n")
    assert (
        edit(ctx, old_string="beta", new_string="BETA")
        == f"Successfully edited {tmp_path.resolve() / 'f.txt'} (1 replacement)"
    )
    assert (tmp_path / "f.txt").read_text() == "alpha BETA gamma\n"


def test_edit_several_matches_need_replace_all(ctx, tmp_path):
    (tmp_path / "f.txt").write_text("x x x\n")
    with pytest.raises(
        ToolExecutionError,
        match="old_string appears 3 times in the file; provide more "
        "surrounding context to make it unique, or set replace_all",
    ):
        edit(ctx, old_string="x", new_string="y")
    assert edit(ctx, old_string="x", new_string="y", replace_all=True).endswith("(3 replacements)")
    assert (tmp_path / "f.txt").read_text() == "y y y\n"


@pytest.mark.parametrize(
    "old,new,message",
    [
        ("", "x", "old_string must not be empty; use write_file to create a new file"),
        ("same", "same", "old_string and new_string are identical; nothing to edit"),
        ("absent", "x", "old_string not found in file"),
    ],
)
def test_edit_errors(ctx, tmp_path, old, new, message):
    (tmp_path / "f.txt").write_text("content same\n")
    with pytest.raises(ToolExecutionError, match=message):
        edit(ctx, old_string=old, new_string=new)
    assert (tmp_path / "f.txt").read_text() == "content same\n"


def test_edit_preserves_crlf_and_refuses_binary(ctx, tmp_path):
    (tmp_path / "f.txt").write_bytes(b"a\r\nb\r\n")
    edit(ctx, old_string="b", new_string="c")
    assert (tmp_path / "f.txt").read_bytes() == b"a\r\nc\r\n"
    (tmp_path / "f.txt").write_bytes(b"\xff\xfe")
    with pytest.raises(ToolExecutionError, match="not valid UTF-8"):
        edit(ctx, old_string="a", new_string="b")


def test_edit_refuses_files_too_big_to_read_whole(ctx, tmp_path, monkeypatch):
    monkeypatch.setattr("openheim.tools.read_file.WHOLE_LIMIT", 10)
    (tmp_path / "f.txt").write_text("0123456789abc")
    with pytest.raises(ToolExecutionError, match="the file is 13 bytes; only files up to 10 bytes can be read whole"):
        edit(ctx, old_string="a", new_string="b")


# --- list_dir -------------------------------------------------------------------


def test_list_dir_marks_dirs_and_symlinks(ctx, tmp_path):
    (tmp_path / "b.txt").write_text("")
    (tmp_path / "a_dir").mkdir()
    (tmp_path / ".hidden").write_text("")
    os.symlink("b.txt", tmp_path / "c_link")
    os.symlink("a_dir", tmp_path / "d_dirlink")
    out = ListDirTool().execute({}, ctx)
    assert out == ".hidden\na_dir/\nb.txt\nc_link -> b.txt\nd_dirlink -> a_dir"


def test_list_dir_sorts_by_raw_name(ctx, tmp_path):
    for name in ["b", "B", "a", "_", "é"]:
        (tmp_path / name).write_text("")
    assert ListDirTool().execute({"path": "."}, ctx).split("\n") == ["B", "_", "a", "b", "é"]


def test_list_dir_caps_at_500(ctx, tmp_path):
    (tmp_path / "many").mkdir()
    for i in range(503):
        (tmp_path / "many" / f"f{i:04d}").write_text("")
    out = ListDirTool().execute({"path": "many"}, ctx).split("\n")
    assert len(out) == 501 and out[499] == "f0499" and out[500] == "... [3 more entries omitted]"


def test_list_dir_empty_missing_and_file(ctx, tmp_path):
    (tmp_path / "e").mkdir()
    assert ListDirTool().execute({"path": "e"}, ctx) == "(empty directory)"
    with pytest.raises(ToolExecutionError, match="does not exist"):
        ListDirTool().execute({"path": "missing"}, ctx)
    (tmp_path / "f").write_text("")
    with pytest.raises(ToolExecutionError, match="is not a directory"):
        ListDirTool().execute({"path": "f"}, ctx)


def test_list_dir_defaults_to_the_session_cwd(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "only.txt").write_text("")
    ctx = TurnContext(work_dir=tmp_path, cwd=tmp_path / "sub", cancel=CancelToken())
    assert ListDirTool().execute({"path": None}, ctx) == "only.txt"


def test_fifos_are_refused_without_hanging(ctx, tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ToolExecutionError, match="is not a regular file"):
        read(ctx, path="pipe")
    with pytest.raises(ToolExecutionError, match="cannot write|is not a regular file"):
        WriteFileTool().execute({"path": "pipe", "content": "x"}, ctx)
    with pytest.raises(ToolExecutionError, match="is not a regular file"):
        EditFileTool().execute({"path": "pipe", "old_string": "a", "new_string": "b"}, ctx)


def test_a_symlink_swapped_in_after_validation_is_not_followed(tmp_path):
    from openheim.tools.write_file import write_text

    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (tmp_path / "work").mkdir()
    link = tmp_path / "work" / "late.txt"
    os.symlink(outside, link)
    with pytest.raises(ToolExecutionError, match="cannot write"):
        write_text(link, "pwned", TurnContext(work_dir=tmp_path / "work"))
    assert outside.read_text() == "keep"


@pytest.mark.parametrize(
    "offset,limit,expected",
    [
        (1, 2, "line 1\nline 2\n[lines 1–2 shown; call again with offset=3 to read on]"),
        (4, 2, "line 4\nline 5\n"),
        (3, 3, "line 3\nline 4\nline 5\n"),
        (5, 1, "line 5\n"),
        (6, 1, "[nothing at offset 6]"),
    ],
)
def test_client_page_with_a_limit_says_whether_more_follows(tmp_path, offset, limit, expected):
    target = str(tmp_path.resolve() / "paged.txt")
    client = FakeClient({target: lines(5)})
    ctx = TurnContext(work_dir=tmp_path, cwd=tmp_path, client_io=client)
    assert read(ctx, path="paged.txt", offset=offset, limit=limit) == expected
    (tmp_path / "paged.txt").write_text(lines(5))
    local = TurnContext(work_dir=tmp_path, cwd=tmp_path)
    if offset <= 5:  # the same page read from the disk ends in the same note (with the total there)
        assert read(local, path="paged.txt", offset=offset, limit=limit) == expected.replace(
            "–2 shown", "–2 of 5 shown"
        )


def test_client_page_without_a_limit_has_no_note(tmp_path):
    target = str(tmp_path.resolve() / "all.txt")
    client = FakeClient({target: lines(3)})
    ctx = TurnContext(work_dir=tmp_path, cwd=tmp_path, client_io=client)
    assert read(ctx, path="all.txt", offset=2) == "line 2\nline 3\n"
    assert client.calls == [("read", target, 2, None)]


def test_read_of_a_huge_file_with_a_long_first_line_reads_only_what_it_returns(tmp_path):
    """A 20 GB sparse file whose first line never ends: the page is the line's start, found at once."""
    import subprocess
    import sys

    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as f:
        f.write(b"x" * 200_000)
        f.truncate(20 * 1024**3)
    code = (
        "import sys; from openheim.core.turn_context import TurnContext; from openheim.tools.read_file import ReadFileTool;"
        f"sys.stdout.write(ReadFileTool().execute({{'path': 'huge.txt'}}, TurnContext(work_dir={str(tmp_path)!r})))"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("read_file scanned the whole 20 GB file for the end of its first line")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "x" * CAP + (
        f"\n[line 1 is longer than {CAP} bytes; only its start is shown; "
        "call again with offset=2 for the lines after it]"
    )


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_writing_a_hard_linked_file_leaves_the_other_link_alone(ctx, tmp_path, tool):
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("outside original\n")
    os.link(outside, tmp_path / "linked.txt")
    if tool == "write_file":
        WriteFileTool().execute({"path": "linked.txt", "content": "new content\n"}, ctx)
    else:
        EditFileTool().execute(
            {"path": "linked.txt", "old_string": "outside original", "new_string": "new content"}, ctx
        )
    assert (tmp_path / "linked.txt").read_text() == "new content\n"
    assert outside.read_text() == "outside original\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["linked.txt"]  # no temporary file left behind


def test_rewriting_keeps_the_mode_and_a_new_file_gets_the_umask(ctx, tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("echo one\n")
    script.chmod(0o751)
    WriteFileTool().execute({"path": "run.sh", "content": "echo two\n"}, ctx)
    EditFileTool().execute({"path": "run.sh", "old_string": "two", "new_string": "three"}, ctx)
    assert script.read_text() == "echo three\n" and script.stat().st_mode & 0o7777 == 0o751
    old = os.umask(0o027)
    try:
        WriteFileTool().execute({"path": "fresh.txt", "content": "x"}, ctx)
    finally:
        os.umask(old)
    assert (tmp_path / "fresh.txt").stat().st_mode & 0o777 == 0o640


def test_a_failed_write_leaves_the_old_content(ctx, tmp_path):
    (tmp_path / "keep.txt").write_text("kept\n")
    with pytest.raises(ToolExecutionError, match="content is not valid Unicode text"):
        WriteFileTool().execute({"path": "keep.txt", "content": "half \ud800"}, ctx)
    assert (tmp_path / "keep.txt").read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
