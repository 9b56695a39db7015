"""Table-driven sandbox escape attempts: every case is refused or stays inside, and nothing outside changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openheim.core.turn_context import TurnContext
from openheim.errors import OpenheimError, ToolExecutionError
from openheim.tools.edit_file import EditFileTool
from openheim.tools.list_dir import ListDirTool
from openheim.tools.read_file import ReadFileTool
from openheim.tools.sandbox import (
    normalize,
    sandbox_root,
    validate_entry,
    validate_path,
)
from openheim.tools.search import SearchTool
from openheim.tools.write_file import WriteFileTool


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """work/ (the sandbox), outside/ with a secret, and work2/ whose name shares work's prefix."""
    work, outside, work2 = tmp_path / "work", tmp_path / "outside", tmp_path / "work2"
    for d in (work / "sub", outside, work2):
        d.mkdir(parents=True)
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (work2 / "file").write_text("neighbour\n")
    (work / "file.txt").write_text("inside\n")
    (work / "sub" / "inner.txt").write_text("inner\n")
    links = {
        "link_out": "../outside",
        "link_out_file": "../outside/secret.txt",
        "dangling": "../nowhere",
        "loop1": "loop2",
        "loop2": "loop1",
        "link_in": "sub",
        "link_parent": "..",
        "chain1": "chain2",
        "chain2": "../outside",
        "sub/link_up": "../../outside",
    }
    for name, target in links.items():
        os.symlink(target, work / name)
    return {"root": tmp_path, "work": work, "outside": outside, "work2": work2}


def snapshot(*dirs: Path) -> dict[str, bytes]:
    """Every file under the given directories (not following links) with its content."""
    seen = {}
    for d in dirs:
        for path in sorted(d.rglob("*")):
            if path.is_file() and not path.is_symlink():
                seen[str(path)] = path.read_bytes()
            else:
                seen[str(path)] = b"<entry>"
    return seen


OUT = "{outside}"
ESCAPES = [
    ("parent_dotdot", "../outside/secret.txt"),
    ("deep_dotdot", "../../../../../../etc/passwd"),
    ("dotdot_after_sub", "sub/../../outside/secret.txt"),
    ("dotdot_through_missing", "missing/../../outside/new.txt"),
    ("dotdot_chain_missing", "a/b/c/../../../../outside/new.txt"),
    ("absolute_etc", "/etc/passwd"),
    ("absolute_outside_file", OUT + "/secret.txt"),
    ("absolute_outside_new", OUT + "/new.txt"),
    ("absolute_with_dotdot", "{work}/../outside/secret.txt"),
    ("root_dotdot", "/../../etc/passwd"),
    ("double_slash_root", "//etc/passwd"),
    ("symlink_dir_out", "link_out/secret.txt"),
    ("symlink_parent_new_file", "link_out/new.txt"),
    ("symlink_file_out", "link_out_file"),
    ("symlink_itself_out", "link_out"),
    ("symlink_chain_out", "chain1/secret.txt"),
    ("nested_symlink_up", "sub/link_up/secret.txt"),
    ("symlink_to_parent", "link_parent/outside/secret.txt"),
    ("dangling_symlink", "dangling"),
    ("through_dangling", "dangling/new.txt"),
    ("symlink_loop", "loop1"),
    ("through_loop", "loop1/x.txt"),
    ("proc_self_root", "/proc/self/root/etc/passwd"),
    ("proc_self_root_outside", "/proc/self/root" + OUT + "/secret.txt"),
    ("prefix_sibling", "../work2/file"),
    ("prefix_sibling_dir", "../work2"),
    ("bare_dotdot", ".."),
    ("dotdot_trailing_slash", "../"),
    ("dot_segments", "./../."),
    ("dot_double_slash", "sub/./../..//outside/secret.txt"),
    ("trailing_slash_outside", "../outside/"),
    ("nul_byte", "file.txt\0../../outside/secret.txt"),
    ("nul_in_dir", "sub/\0/../../outside"),
    ("very_long_path", "a/" * 2100 + "x"),
    ("long_component", "b" * 300),
    ("long_dotdot_chain", "../" * 1500 + "etc/passwd"),
]
INSIDE = [
    ("one_dot_leader_pair", "\u2024\u2024/x.txt"),
    ("two_dot_leader", "\u2025/x.txt"),
    ("fullwidth_dots", "\uff0e\uff0e/x.txt"),
    ("dotdot_zero_width", "..\u200b/x.txt"),
    ("percent_encoded", "%2e%2e/%2e%2e/x.txt"),
    ("three_dots", ".../x.txt"),
    ("tilde", "~/x.txt"),
    ("backslash_dotdot", "..\\..\\x.txt"),
    ("legit_symlink", "link_in/inner.txt"),
    ("dotdot_back_inside", "sub/../file.txt"),
    ("combining_dot", ".\u0307./x.txt"),
]


def _fill(path: str, tree: dict[str, Path]) -> str:
    return path.replace("{outside}", str(tree["outside"])).replace("{work}", str(tree["work"]))


@pytest.mark.parametrize("path", [p for _, p in ESCAPES], ids=[i for i, _ in ESCAPES])
def test_escape_is_refused_and_touches_nothing(tree, path):
    work = tree["work"]
    path = _fill(path, tree)
    before = snapshot(tree["outside"], tree["work2"])
    with pytest.raises(ToolExecutionError):
        validate_path(path, work, work)
    ctx = TurnContext(work_dir=work, cwd=work)
    attempts = [
        (WriteFileTool(), {"path": path, "content": "pwned"}),
        (EditFileTool(), {"path": path, "old_string": "SECRET", "new_string": "pwned"}),
        (ReadFileTool(), {"path": path}),
        (ListDirTool(), {"path": path}),
        (SearchTool(use_rg=False), {"pattern": "SECRET|neighbour|root", "path": path}),
    ]
    for tool, args in attempts:
        with pytest.raises(OpenheimError) as info:
            tool.execute(args, ctx)
        assert "SECRET" not in str(info.value) and "neighbour" not in str(info.value)
    assert snapshot(tree["outside"], tree["work2"]) == before


@pytest.mark.parametrize("path", [p for _, p in INSIDE], ids=[i for i, _ in INSIDE])
def test_lookalike_names_stay_inside(tree, path):
    work = tree["work"]
    before = snapshot(tree["outside"], tree["work2"])
    resolved = validate_path(path, work, work)
    assert resolved.is_relative_to(work.resolve())
    result = WriteFileTool().execute({"path": path, "content": "ok"}, TurnContext(work_dir=work, cwd=work))
    assert result.startswith("Successfully wrote to ")
    assert snapshot(tree["outside"], tree["work2"]) == before


def test_escape_table_is_big_enough():
    assert len(ESCAPES) >= 30


def test_messages_name_the_problem(tree):
    work = tree["work"]
    with pytest.raises(ToolExecutionError, match=r"is outside the work directory '"):
        validate_path("../outside/secret.txt", work, work)
    with pytest.raises(ToolExecutionError, match=r"path 'dangling' is a dangling symlink"):
        validate_path("dangling", work, work)
    with pytest.raises(ToolExecutionError, match=r"NUL byte"):
        validate_path("a\0b", work, work)
    with pytest.raises(ToolExecutionError, match=r"too long"):
        validate_path("a/" * 3000, work, work)
    with pytest.raises(ToolExecutionError, match=r"directory '.*' is inaccessible"):
        validate_path("x", tree["root"] / "missing", None)


def test_cwd_outside_work_dir_grants_nothing(tree):
    work, outside = tree["work"], tree["outside"]
    resolved = validate_path("secret.txt", work, outside)
    assert resolved == work.resolve() / "secret.txt"
    ctx = TurnContext(work_dir=work, cwd=outside)
    with pytest.raises(ToolExecutionError, match="not found"):
        ReadFileTool().execute({"path": "secret.txt"}, ctx)


def test_relative_paths_start_at_the_session_cwd(tree):
    work = tree["work"]
    assert validate_path("inner.txt", work, work / "sub") == work.resolve() / "sub" / "inner.txt"
    assert validate_path("../file.txt", work, work / "sub") == work.resolve() / "file.txt"


def test_symlinked_work_dir_is_canonicalised(tree):
    alias = tree["root"] / "alias"
    os.symlink(tree["work"], alias)
    assert validate_path(str(alias / "file.txt"), alias, alias) == tree["work"].resolve() / "file.txt"
    assert validate_path(str(alias / "new" / "x"), alias, alias) == tree["work"].resolve() / "new" / "x"


@pytest.mark.parametrize("path", ["", ".", "sub/..", "{work}", "{work}/", "{work}/sub/.."])
def test_entry_refuses_the_work_dir_itself(tree, path):
    with pytest.raises(ToolExecutionError, match="is the work directory itself"):
        validate_entry(_fill(path, tree), tree["work"], tree["work"])


def test_entry_operates_on_the_link_not_its_target(tree):
    work = tree["work"]
    assert validate_entry("link_out", work, work) == work.resolve() / "link_out"
    assert validate_entry("dangling", work, work) == work.resolve() / "dangling"
    with pytest.raises(ToolExecutionError, match="outside"):
        validate_entry("link_out/secret.txt", work, work)
    with pytest.raises(ToolExecutionError, match="outside"):
        validate_entry("../outside", work, work)


def test_normalize_is_lexical():
    assert normalize("x/../../y", "/w") == "/y"
    assert normalize("/a/./b//c/..", "/w") == "/a/b"
    assert normalize("../../..", "/w") == "/"


def test_sandbox_root_refuses_cwd_outside_configured_work_dir(tree):
    from openheim.errors import InvalidArgument

    assert sandbox_root(None, tree["outside"]) == tree["outside"]
    assert sandbox_root(tree["work"], tree["work"] / "sub") == tree["work"]
    with pytest.raises(InvalidArgument, match="outside the configured work_dir"):
        sandbox_root(tree["work"], tree["outside"])


FLIPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
os.chdir(sys.argv[1])
until = time.monotonic() + float(sys.argv[2])
print("ready", flush=True)
while time.monotonic() < until:  # swap the names d (a directory) and dl (a symlink to outside) atomically
    if libc.renameat2(-100, b"d", -100, b"dl", 2) != 0:
        sys.exit("renameat2 failed: " + os.strerror(ctypes.get_errno()))
"""


def test_a_directory_flipped_to_a_symlink_mid_call_leads_nowhere(tmp_path):
    """Another local process swaps work/d between a directory and a symlink to outside/ as fast as it can."""
    import subprocess
    import sys
    import time

    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "d").mkdir(parents=True)
    outside.mkdir()
    os.symlink(outside, work / "dl")
    for where, word in ((work / "d", "inside"), (outside, "OUTSIDE")):
        (where / "secret.txt").write_text(f"{word} secret\n")
        (where / "e.txt").write_text(f"{word} old\n")
    (outside / "only_outside.txt").write_text("")
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    ctx = TurnContext(work_dir=work, cwd=work)
    flipper = subprocess.Popen([sys.executable, "-c", FLIPPER, str(work), "30"], stdout=subprocess.PIPE, text=True)
    counts = {"ok": 0, "refused": 0}
    leaks: list[str] = []

    def attempt(call, *args) -> str | None:
        try:
            out = call(*args)
        except OpenheimError:
            counts["refused"] += 1
            return None
        counts["ok"] += 1
        return out

    try:
        assert flipper.stdout.readline().strip() == "ready"
        start = time.monotonic()
        for i in range(400):
            if time.monotonic() - start > 40:
                break
            attempt(WriteFileTool().execute, {"path": f"d/f{i}.txt", "content": "x"}, ctx)
            for _ in range(3):
                out = attempt(ReadFileTool().execute, {"path": "d/secret.txt"}, ctx)
                if out is not None and "OUTSIDE" in out:
                    leaks.append(f"read_file: {out!r}")
            listing = attempt(ListDirTool().execute, {"path": "d"}, ctx)
            if listing is not None and "only_outside" in listing:
                leaks.append("list_dir showed outside/")
            attempt(EditFileTool().execute, {"path": "d/e.txt", "old_string": "old", "new_string": "new"}, ctx)
            attempt(EditFileTool().execute, {"path": "d/e.txt", "old_string": "new", "new_string": "old"}, ctx)
            if i % 20 == 0:
                for path in ("d", "."):
                    found = attempt(SearchTool().execute, {"pattern": "OUTSIDE|only", "path": path}, ctx)
                    if found is not None and "OUTSIDE" in found:
                        leaks.append(f"search: {found!r}")
    finally:
        flipper.kill()
        flipper.wait()
    after = {p.name: p.read_bytes() for p in outside.iterdir()}
    assert leaks == [] and after == before, f"{len(leaks)} leaks, outside changed: {sorted(set(after) - set(before))}"
    assert counts["ok"] > 100 and counts["refused"] > 0, counts  # both states of d were really met


def test_a_diff_preview_never_shows_a_file_outside(tree):
    """The permission prompt's diff for write_file/edit_file reads the old text: only inside the session dir."""
    from openheim.core.tools import ToolRegistry, ViewContext
    from openheim.tools.builtins import register_builtins

    registry = ToolRegistry()
    register_builtins(registry, allow_shell=False)
    where = ViewContext(tree["work"])
    for path in ("../outside/secret.txt", str(tree["outside"] / "secret.txt"), "link_out/secret.txt", "link_out_file"):
        write = registry.present("write_file", {"path": path, "content": "x"}, where)
        edit = registry.present("edit_file", {"path": path, "old_string": "TOP", "new_string": "x"}, where)
        assert write.diff is not None and write.diff.old_text is None, path
        assert edit.diff is None, path
    inside = registry.present("write_file", {"path": "file.txt", "content": "x"}, where)
    assert inside.diff.old_text == "inside\n"
