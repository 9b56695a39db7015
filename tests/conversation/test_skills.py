"""SkillsManager: both layouts, frontmatter, name validation, symlink containment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openheim.conversation.skills import (
    Skill,
    SkillsManager,
    is_valid_name,
    split_frontmatter,
)
from openheim.errors import InvalidArgument, NotFound


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    d = tmp_path / "skills"
    d.mkdir()
    return d


def test_flat_file_content_kept_verbatim(skills_dir: Path) -> None:
    (skills_dir / "rust.md").write_text("  Use cargo.\n\n  Indented.\n")
    assert SkillsManager(skills_dir).load("rust") == Skill("rust", "", "  Use cargo.\n\n  Indented.\n")


def test_directory_layout_with_frontmatter(skills_dir: Path) -> None:
    (skills_dir / "pdf").mkdir()
    (skills_dir / "pdf" / "SKILL.md").write_text(
        '---\nname: PDF tools\ndescription: "Read and fill PDF forms"\nlicense: MIT\n---\n\n# PDF\nSteps.\n'
    )
    skill = SkillsManager(skills_dir).load("pdf")
    assert skill == Skill("pdf", "Read and fill PDF forms", "# PDF\nSteps.\n")


def test_flat_file_wins_over_directory(skills_dir: Path) -> None:
    (skills_dir / "x.md").write_text("flat")
    (skills_dir / "x").mkdir()
    (skills_dir / "x" / "SKILL.md").write_text("nested")
    assert SkillsManager(skills_dir).load("x").content == "flat"


@pytest.mark.parametrize(
    "text,fields,body",
    [
        ("no frontmatter\n", {}, "no frontmatter\n"),
        ("---\nunterminated: yes\nbody", {}, "---\nunterminated: yes\nbody"),
        ("---\r\ndescription: 'win'\r\n---\r\nbody\r\n", {"description": "win"}, "body\r\n"),
        ("---\n# comment\n  nested: ignored\nkey: a: b\n---\nb", {"key": "a: b"}, "b"),
        ("---\nJust a rule above a paragraph.\n---\nmore", {}, "---\nJust a rule above a paragraph.\n---\nmore"),
    ],
)
def test_split_frontmatter(text: str, fields: dict, body: str) -> None:
    assert split_frontmatter(text) == (fields, body)


@pytest.mark.parametrize("name", ["", ".", "..", "a..b", "../etc", "a/b", "a\\b", "nul\0l"])
def test_invalid_names_rejected_before_touching_fs(tmp_path: Path, name: str) -> None:
    manager = SkillsManager(tmp_path / "does-not-exist")
    with pytest.raises(InvalidArgument) as info:
        manager.load(name)
    assert (
        str(info.value)
        == f"Invalid argument: Invalid skill name '{name}': must be a single path component without '..'"
    )
    assert not is_valid_name(name)


def test_missing_skill(skills_dir: Path) -> None:
    with pytest.raises(NotFound, match=r"^Skill 'ghost' not found at .*ghost\.md"):
        SkillsManager(skills_dir).load("ghost")


def test_symlink_outside_is_refused_inside_is_fine(skills_dir: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("secret")
    (skills_dir / "real.md").write_text("real")
    os.symlink(secret, skills_dir / "evil.md")
    os.symlink(skills_dir / "real.md", skills_dir / "alias.md")
    outside_dir = tmp_path / "outside"
    outside_dir.mkdir()
    (outside_dir / "SKILL.md").write_text("x")
    os.symlink(outside_dir, skills_dir / "evildir")
    manager = SkillsManager(skills_dir)
    with pytest.raises(InvalidArgument, match="resolves outside the skills directory"):
        manager.load("evil")
    with pytest.raises(InvalidArgument, match="resolves outside the skills directory"):
        manager.load("evildir")
    assert manager.load("alias").content == "real"


def test_list_sorted_both_layouts_skipping_bad(skills_dir: Path, tmp_path: Path) -> None:
    (skills_dir / "zeta.md").write_text("z")
    (skills_dir / "alpha.md").write_text("a")
    (skills_dir / "notes.txt").write_text("ignored")
    (skills_dir / "mid").mkdir()
    (skills_dir / "mid" / "SKILL.md").write_text("---\ndescription: m\n---\nm")
    (skills_dir / "empty-dir").mkdir()
    (tmp_path / "out.md").write_text("o")
    os.symlink(tmp_path / "out.md", skills_dir / "escape.md")
    skills = SkillsManager(skills_dir).list()
    assert [s.name for s in skills] == ["alpha", "mid", "zeta"]
    assert skills[1].description == "m"


def test_list_without_dir(tmp_path: Path) -> None:
    assert SkillsManager(tmp_path / "nope").list() == []
