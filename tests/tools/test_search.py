"""search: ignore rules, hidden/binary skipping, output format, caps, and rg vs Python parity."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from openheim.core.turn_context import TurnContext
from openheim.errors import ToolExecutionError
from openheim.tools import search as search_mod
from openheim.tools import search_files, search_rg
from openheim.tools.ignore import RuleSet, glob_to_regex, is_ignored
from openheim.tools.search import SearchTool, run_search
from openheim.tools.search_rg import is_portable

HAS_RG = search_rg.rg_binary() is not None  # the product's lookup: PATH, else beside the interpreter
ENGINES = [False] + ([True] if HAS_RG else [])


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def search(root: Path, pattern: str, use_rg: bool = False, **args) -> str:
    ctx = TurnContext(work_dir=root, cwd=root)
    return SearchTool(use_rg=use_rg).execute({"pattern": pattern, **args}, ctx)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    write(
        tmp_path,
        {
            ".gitignore": "*.log\n!keep.log\nbuild/\n/anchored.txt\ndocs/**/gen_*\n",
            ".ignore": "secret_*\n",
            "src/main.py": "def hit():\n    return 'hit'   \n",
            "src/anchored.txt": "hit nested anchored\n",
            "anchored.txt": "hit top anchored\n",
            "app.log": "hit log\n",
            "keep.log": "hit keep\n",
            "build/out.py": "hit build\n",
            "sub/build": "hit file named build\n",
            "docs/a/b/gen_x.md": "hit generated\n",
            "docs/a/b/real.md": "hit real\n",
            "secret_token.txt": "hit secret\n",
            ".hidden.py": "hit hidden\n",
            ".cache/x.py": "hit hidden dir\n",
            "bin.dat": b"hit\x00binary\n",
            "latin.txt": b"hit caf\xe9\n",
        },
    )
    os.symlink("src/main.py", tmp_path / "link.py")
    return tmp_path


@pytest.mark.parametrize("use_rg", ENGINES)
def test_ignore_hidden_binary_and_symlinks(repo, use_rg):
    assert search(repo, "hit", use_rg) == (
        "docs/a/b/real.md:1: hit real\n"
        "keep.log:1: hit keep\n"
        "src/anchored.txt:1: hit nested anchored\n"
        "src/main.py:1: def hit():\n"
        "src/main.py:2:     return 'hit'\n"
        "sub/build:1: hit file named build"
    )


def test_ignore_files_do_not_apply_outside_a_git_repo(repo):
    shutil.rmtree(repo / ".git")
    out = search(repo, "hit")
    assert "app.log:1: hit log" in out and "build/out.py:1: hit build" in out and "secret_token.txt" in out
    assert ".hidden" not in out and "bin.dat" not in out


def test_rules_from_parent_directories_apply_to_a_subdirectory_search(repo):
    write(repo, {"src/deep/x.log": "hit deep log\n", "src/deep/y.py": "hit deep py\n"})
    assert search(repo, "hit", path="src/deep") == "y.py:1: hit deep py"


def test_nested_repository_starts_fresh(repo):
    write(repo, {"vendor/lib/.git/HEAD": "ref\n", "vendor/lib/x.log": "hit nested log\n"})
    assert "vendor/lib/x.log:1: hit nested log" in search(repo, "hit")


def test_a_file_root_prints_its_full_path(repo):
    out = search(repo, "return", path="src/main.py")
    assert out == f"{(repo / 'src/main.py').resolve()}:2:     return 'hit'"


def test_case_insensitive(repo):
    write(repo, {"c.txt": "HIT upper\n"})
    assert search(repo, "hit upper") == "(no matches found)"
    assert search(repo, "hit upper", case_insensitive=True) == "c.txt:1: HIT upper"


def test_match_cap(tmp_path):
    write(tmp_path, {"a.txt": "m\n" * 150, "b.txt": "m\n" * 150})
    lines = search(tmp_path, "m").split("\n")
    assert len(lines) == 201 and lines[199] == "b.txt:50: m"
    assert lines[200] == "... [results truncated at 200 matches]"


def test_file_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(search_mod, "MAX_FILES", 3)  # the message
    monkeypatch.setattr(search_files, "MAX_FILES", 3)  # the walk
    write(tmp_path, {f"f{i}.txt": "x\n" for i in range(5)})
    assert search(tmp_path, "nothing") == "(no matches found; search stopped after 3 files)"
    assert search(tmp_path, "x") == "f0.txt:1: x\nf1.txt:1: x\nf2.txt:1: x\n... [search stopped after 3 files]"


def test_no_match_bad_pattern_and_missing_path(tmp_path):
    write(tmp_path, {"a.txt": "abc\n"})
    assert search(tmp_path, "zzz") == "(no matches found)"
    with pytest.raises(ToolExecutionError, match=r"Invalid pattern '\(': missing \)"):
        search(tmp_path, "(")
    with pytest.raises(ToolExecutionError, match="does not exist"):
        search(tmp_path, "a", path="missing")


def test_cancelled_search(tmp_path):
    write(tmp_path, {"a.txt": "abc\n"})
    ctx = TurnContext(work_dir=tmp_path, cwd=tmp_path)
    ctx.cancel.cancel()
    with pytest.raises(ToolExecutionError, match="search cancelled"):
        SearchTool(use_rg=False).execute({"pattern": "a"}, ctx)


PARITY_FILES: dict[str, str | bytes] = {
    "a.py": "def foo(x):\n\treturn x  \n\nclass Foo:  \n    pass\n",
    "b/c.txt": "alpha\r\nbeta\r\ngamma\n",
    "b/d.md": "\ufeffbom first line\nsecond\n",
    "e/unicode.txt": "Kelvin \u212a sign\nlong \u017f s\nStraße\nGROSSES \u1e9e\nÉcole\nnaïve café\nΣίσυφος ς\n",
    "e/empty.txt": "",
    "e/noeol.txt": "last line without newline",
    "f/g/h.txt": "foo.bar\nfoo-bar\nfoo(bar)\n[x]\n{y}\n|z|\n$money^\n",
    "nul.bin": b"foo\x00bar\n",
    "latin.txt": b"foo caf\xe9\n",
    "long.txt": "x" * 5000 + "foo\n",
}
PARITY_PATTERNS = [
    "foo",
    "Foo",
    "^def",
    "pass$",
    "^$",
    "x  $",
    "a.pha",
    "foo\\.bar",
    "foo[-.]bar",
    "foo\\(bar\\)",
    "[a-c]+",
    "[^a-z ]+",
    "(alpha|gamma)",
    "(?:be)+ta",
    "o{2}",
    "o{1,}",
    "x{5000}foo",
    "\\[x\\]",
    "\\{y\\}",
    "\\|z\\|",
    "\\$money\\^",
    "k",
    "s",
    "STRASSE",
    "école",
    "ß",
    "caf.",
    "line$",
    "\\t",
    "e",
    ".*",
    "bom",
    "^bom",
    r"\w+",
    r"\d",
    r"\bfoo\b",
    "(?i)foo",
    "[[:alpha:]]",
    "a{,2}",
    "^o{2}+",
    "(?:a|b)++",
    "[a-c-e]+",
    "[x-z-]",
    "σ",
    "[α-ω]+",
]


@pytest.mark.skipif(not HAS_RG, reason="rg not installed")
@pytest.mark.parametrize("case_insensitive", [False, True])
@pytest.mark.parametrize("pattern", PARITY_PATTERNS)
def test_rg_and_python_engines_agree(tmp_path, pattern, case_insensitive):
    write(tmp_path, PARITY_FILES)
    python = run_search(str(tmp_path), pattern, case_insensitive, use_rg=False)
    auto = run_search(str(tmp_path), pattern, case_insensitive, use_rg=None)
    assert auto == python


@pytest.mark.skipif(not HAS_RG, reason="rg not installed")
def test_rg_engine_really_runs_for_portable_patterns(tmp_path, monkeypatch):
    write(tmp_path, {"a.txt": "foo\n"})
    monkeypatch.setattr(search_mod, "python_search", lambda *a: pytest.fail("python engine used"))
    assert run_search(str(tmp_path), "fo+", False, use_rg=True) == "a.txt:1: foo"


def test_missing_rg_falls_back_to_python(tmp_path, monkeypatch):
    write(tmp_path, {"a.txt": "foo\n"})
    monkeypatch.setattr(search_rg, "rg_binary", lambda: None)
    monkeypatch.setattr(search_rg.subprocess, "Popen", lambda *a, **k: pytest.fail("rg was run"))
    assert run_search(str(tmp_path), "foo", False) == "a.txt:1: foo"
    with pytest.raises(ToolExecutionError, match="needs ripgrep"):
        run_search(str(tmp_path), "foo", False, use_rg=True)


def test_rg_beside_the_interpreter_is_found_when_path_lacks_it(tmp_path, monkeypatch):
    """A venv's bin/ (where `pip install ripgrep` puts rg) is not on PATH unless the venv is activated."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "rg").write_text("#!/bin/sh\n")
    (bin_dir / "rg").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(search_rg.sys, "executable", str(bin_dir / "python"))
    assert search_rg.rg_binary() == str(bin_dir / "rg")
    (bin_dir / "rg").chmod(0o644)
    assert search_rg.rg_binary() is None


def test_the_test_extra_makes_the_suite_exercise_rg_without_path():
    """`pip install -e '.[test]'` brings rg (PyPI `ripgrep`) into the venv; `.venv/bin/python -m pytest`
    runs with the venv's bin/ off PATH, and the rg engine must still be found and run."""
    import importlib.metadata
    import subprocess
    import sys

    try:
        importlib.metadata.distribution("ripgrep")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the 'ripgrep' package of the test extra is not installed (pip install -e '.[test]')")
    code = (
        "from openheim.tools.search_rg import rg_binary, usable\n"
        "print(rg_binary()); assert usable('fo+', required=True)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/nonexistent", "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.path.join(os.path.dirname(sys.executable), "rg")


@pytest.mark.parametrize(
    "pattern,portable",
    [
        ("foo", True),
        ("foo.*bar", True),
        ("^a|b$", True),
        ("[a-z0-9_]+", True),
        ("(?:ab)+", True),
        ("a{2,3}", True),
        ("\\.\\*", True),
        ("[^\\]x]", True),
        ("\\d", False),
        ("\\w+", False),
        ("\\s", False),
        ("\\bx", False),
        ("(?i)x", False),
        ("(?P<n>x)", False),
        ("(?=x)", False),
        ("[[:alpha:]]", False),
        ("[a&&b]", False),
        ("{x", False),
        ("a{,2}", False),
        ("\\n", False),
        ("\\1", False),
        ("[]a]", False),
        ("a\\!", False),
        ("^a{2}+$", False),
        ("a*+", False),
        ("[a-c-e]", False),
        ("[-a]", True),
        ("[a-]", True),
        ("[a-cx-z]", True),
        ("[\\--z]", True),
    ],
)
def test_portable_pattern_subset(pattern, portable):
    assert is_portable(pattern) is portable


@pytest.mark.parametrize(
    "glob,path,matches",
    [
        ("*.log", "a.log", True),
        ("*.log", "d/a.log", False),
        ("a/**/b", "a/x/y/b", True),
        ("a/**/b", "a/b", True),
        ("**/x", "p/q/x", True),
        ("x/**", "x/y/z", True),
        ("?.txt", "ab.txt", False),
        ("[ab].c", "b.c", True),
        ("[!ab].c", "c.c", True),
        ("\\*.c", "*.c", True),
        ("\\*.c", "x.c", False),
    ],
)
def test_glob_translation(glob, path, matches):
    import re

    assert (re.fullmatch(glob_to_regex(glob), path) is not None) is matches


def test_rule_precedence():
    levels = [RuleSet("/r", "*.txt\n!keep.txt\ndir_only/\n# comment\n\\#literal\n"), RuleSet("/r/sub", "!*.txt\n")]
    assert is_ignored(levels, "/r/a.txt", False)
    assert not is_ignored(levels, "/r/keep.txt", False)
    assert not is_ignored(levels, "/r/sub/a.txt", False)
    assert is_ignored(levels, "/r/x/dir_only", True) and not is_ignored(levels, "/r/x/dir_only", False)
    assert is_ignored(levels, "/r/#literal", False)
    assert not is_ignored(levels, "/other/a.txt", False)


def test_fifos_in_the_tree_do_not_hang(repo):
    os.mkfifo(repo / "src" / "pipe")
    (repo / ".ignore").unlink()
    os.mkfifo(repo / ".ignore")
    assert "src/main.py:1: def hit():" in search(repo, "hit")
    assert search(repo, "hit", path="src/pipe") == "(no matches found)"
