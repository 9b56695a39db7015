"""The one workspace writer: undo (and every other write openheim makes into a workspace) never follows a
link or opens a FIFO planted by a hostile turn or repository; a scan finds every file-writing call in the
package and checks it is the writer or a write into openheim's own private data dir."""

from __future__ import annotations

import ast
import json
import os
import stat
from pathlib import Path

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim.config.project_settings import save_allow_rule
from openheim.config.workspace_write import write_beneath, write_path
from openheim.errors import ConfigError

PACKAGE = Path(__file__).resolve().parents[2] / "openheim"
OLD_TEMP = "notes.txt.openheim-undo"  # the name undo used to open with open(..., "wb")


@pytest.fixture
def workspace(tmp_path):
    """A project, a file outside it standing for ~/.bashrc (0600), and a session whose turn changed notes.txt
    and sub/a.txt with write_file."""
    root = tmp_path / "project"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("original notes\n")
    (root / "sub" / "a.txt").write_text("original a\n")
    outside = tmp_path / "home"
    outside.mkdir()
    bashrc = outside / ".bashrc"
    bashrc.write_text("export SAFE=1\n")
    bashrc.chmod(0o600)
    return root, outside, bashrc


def run_turn(home: Path, root: Path) -> str:
    with FakeLLMServer(wire="openai") as srv:
        write_config(home, srv.base_url)
        srv.enqueue(
            Reply(
                tool_calls=[
                    ToolCall("write_file", {"path": "notes.txt", "content": "payload\n"}, id="w1"),
                    ToolCall("write_file", {"path": "sub/a.txt", "content": "payload a\n"}, id="w2"),
                ]
            ),
            Reply(text="done"),
        )
        run = openheim("run", "-o", "json", "change the notes", cwd=root)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["session_id"]


def unchanged(bashrc: Path) -> bool:
    return bashrc.read_text() == "export SAFE=1\n" and stat.S_IMODE(bashrc.stat().st_mode) == 0o600


def test_a_link_planted_at_the_undo_temp_name_is_never_followed(isolated_home, workspace):
    root, _, bashrc = workspace
    run_turn(isolated_home, root)
    (root / OLD_TEMP).symlink_to(bashrc)
    undo = openheim("undo", "--yes", cwd=root, timeout=30)
    assert undo.returncode == 0, undo.stderr
    assert unchanged(bashrc)
    assert (root / "notes.txt").read_text() == "original notes\n"
    assert not [p.name for p in root.iterdir() if p.name.endswith(".tmp")]


def test_a_fifo_at_the_undo_temp_name_does_not_hang_it(isolated_home, workspace):
    root, _, _ = workspace
    run_turn(isolated_home, root)
    os.mkfifo(root / OLD_TEMP)
    undo = openheim("undo", "--yes", cwd=root, timeout=30)  # the old undo blocked in open() for good
    assert undo.returncode == 0, undo.stderr
    assert (root / "notes.txt").read_text() == "original notes\n"
    assert stat.S_ISFIFO((root / OLD_TEMP).lstat().st_mode)


def test_a_link_at_the_target_is_replaced_not_written_through(isolated_home, workspace):
    root, _, bashrc = workspace
    run_turn(isolated_home, root)
    (root / "notes.txt").unlink()
    (root / "notes.txt").symlink_to(bashrc)
    refused = openheim("undo", "--yes", cwd=root, timeout=30)
    assert refused.returncode != 0 and "notes.txt" in refused.stderr  # changed since the turn
    forced = openheim("undo", "--yes", "--force", cwd=root, timeout=30)
    assert forced.returncode == 0, forced.stderr
    assert unchanged(bashrc)
    assert not (root / "notes.txt").is_symlink() and (root / "notes.txt").read_text() == "original notes\n"


def test_a_symlinked_parent_dir_is_refused_and_the_rest_restored(isolated_home, workspace):
    root, outside, bashrc = workspace
    run_turn(isolated_home, root)
    (root / "sub").rename(root / "moved")
    (root / "sub").symlink_to(outside)  # sub/ now leads to the home directory
    (outside / "a.txt").write_text("the user's own a.txt\n")
    undo = openheim("undo", "--yes", "--force", cwd=root, timeout=30)
    assert undo.returncode == 0, undo.stderr
    assert "not restored: sub/a.txt" in undo.stderr
    assert (outside / "a.txt").read_text() == "the user's own a.txt\n" and unchanged(bashrc)
    assert sorted(p.name for p in outside.iterdir()) == [".bashrc", "a.txt"]
    assert (root / "notes.txt").read_text() == "original notes\n"


def test_the_writer_refuses_links_and_special_files_at_the_target(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="symbolic link"):
        write_path(tmp_path / "link", b"x")
    with pytest.raises(OSError, match="not a regular file"):
        write_path(tmp_path / "fifo", b"x")
    assert not (tmp_path / "elsewhere").exists()
    (tmp_path / "dir").symlink_to(tmp_path.parent)
    with pytest.raises(Exception, match="symlink"):
        write_beneath(tmp_path, "dir/escape.txt", b"x")
    assert not (tmp_path.parent / "escape.txt").exists()


def test_the_writer_sets_the_mode_on_the_descriptor_whatever_the_umask(tmp_path):
    old = os.umask(0o000)
    try:
        write_beneath(tmp_path, "new/deep/file.txt", b"data", mode=0o600)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new" / "deep" / "file.txt").stat().st_mode) == 0o600


# --- every file-writing call in the package ------------------------------------------------------------

WRITER = "config/workspace_write.py"
# Modules that write files other than through the writer, and why that is not a workspace write.
NOT_WORKSPACE = {
    "checkpoints/store.py": "blobs, manifests and logs in the private data dir",
    "conversation/history.py": "conversation logs in the private data dir",
    "conversation/log_files.py": "conversation metadata in the private data dir",
    "conversation/images.py": "images of conversations in the private data dir",
    "conversation/lease.py": "session lock files in the private data dir",
    "config/private_data.py": "open_private: files of the private data dir",
    "mcp/oauth.py": "sign-in tokens in the private data dir",
    "mcp/server_log.py": "MCP server logs in the private data dir",
    "commands/serve.py": "serve's token file in the private data dir",
    "core/llm/tape.py": "the --record file the user named on the command line",
    "tui/__init__.py": "the chat's log file in the data dir (or OPENHEIM_TUI_LOG)",
    "config/init.py": "the .bak copy of config.toml that `init --force` keeps, in the data dir",
    "cli.py": "opens /dev/null",
    "sandbox/helper.py": "the sandbox helper's own /proc writes",
    "sandbox/kernel.py": "the sandbox helper's /proc (uid_map, setgroups) and cgroup control files",
    "sandbox/environ.py": "a descriptor of the child's environment",
    "serve/fs_channel.py": "renames within the work dir relative to checked directory descriptors",
}
_WRITE_CALLS = {"os.replace", "os.rename", "tempfile.mkstemp", "shutil.copy", "shutil.copy2", "shutil.copyfile"}
_WRITE_METHODS = {"write_text", "write_bytes"}
_WRITE_FLAGS = ("O_CREAT", "O_WRONLY", "O_RDWR", "O_TRUNC", "O_APPEND")


def _writes(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func, src = node.func, ast.unparse(node.func)
        if isinstance(func, ast.Name) and func.id == "open" and len(node.args) > 1:
            mode = node.args[1]
            if isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+"):
                found.append(f"{node.lineno}: open(…, {mode.value!r})")
        elif src == "os.open" and len(node.args) > 1 and any(f in ast.unparse(node.args[1]) for f in _WRITE_FLAGS):
            found.append(f"{node.lineno}: os.open(…, {ast.unparse(node.args[1])})")
        elif src in _WRITE_CALLS or (isinstance(func, ast.Attribute) and func.attr in _WRITE_METHODS):
            found.append(f"{node.lineno}: {src}")
    return found


def test_every_file_write_in_the_package_is_the_writer_or_the_data_dir():
    stray = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        calls = _writes(ast.parse(path.read_text(encoding="utf-8")))
        if calls and rel != WRITER and rel not in NOT_WORKSPACE:
            stray[rel] = calls
    assert not stray, f"write these through openheim.config.workspace_write (or list why not): {stray}"
    assert _writes(ast.parse((PACKAGE / WRITER).read_text())), "the scan finds the writer's own writes"


def test_the_file_tools_undo_and_config_edits_call_the_writer():
    users = {
        "tools/write_file.py": "write_path",
        "checkpoints/undo.py": "write_beneath",
        "config/atomic.py": "write_in_dir",
        "serve/fs_channel.py": "replace_at",
    }
    for rel, name in users.items():
        tree = ast.parse((PACKAGE / rel).read_text())
        called = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        assert name in called, rel


def test_saving_an_allow_rule_never_follows_a_shipped_openheim_link(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / ".openheim").symlink_to(elsewhere)  # git stores symlinks: a repository can ship this
    with pytest.raises(ConfigError, match="cannot write"):
        save_allow_rule(root, root, "read_file(*)")
    assert list(elsewhere.iterdir()) == []
    (root / ".openheim").unlink()
    path = save_allow_rule(root, root, "read_file(*)")
    assert "read_file(*)" in path.read_text()
