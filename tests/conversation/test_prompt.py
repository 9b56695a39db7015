"""System prompt assembly: identity, project instructions, skills, ConversationStore.prepare."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openheim.conversation.identity import DEFAULT_IDENTITY, load_identity
from openheim.conversation.instructions import (
    MAX_BYTES,
    Instruction,
    directories,
    load_instructions,
)
from openheim.conversation.prompt import PromptBuilder
from openheim.conversation.skills import Skill
from openheim.conversation.store import ConversationStore
from openheim.errors import ConfigError

SEP = "\n\n---\n\n"
BASE = "You are a general purpose multiprovider LLM agent."


def test_nothing_to_say_means_no_system_message() -> None:
    assert PromptBuilder().build() is None
    assert PromptBuilder(identity=" \n\t").build() is None


def test_identity_only_keeps_whitespace() -> None:
    message = PromptBuilder(identity="  Be terse.\n").build()
    assert message is not None and message.role == "system"
    assert message.text() == f"{BASE}{SEP}The user has given you the following identity:\n\n  Be terse.\n"


def test_all_sections_in_order() -> None:
    builder = PromptBuilder(
        identity="I am X.",
        skills=[Skill("a", "", "Alpha."), Skill("b", "desc", "Beta.")],
        instructions=[Instruction("AGENTS.md", "Root rules."), Instruction("sub/CLAUDE.md", "Sub rules.")],
    )
    assert builder.text() == SEP.join(
        [
            BASE,
            "The user has given you the following identity:\n\nI am X.",
            "Project instructions from AGENTS.md:\n\nRoot rules.",
            "Project instructions from sub/CLAUDE.md:\n\nSub rules.",
            "These are the skills you have mastered:\n\n### a\n\nAlpha.\n\n---\n\n### b\n\nBeta.",
        ]
    )


def test_skills_without_identity_still_build() -> None:
    text = PromptBuilder(skills=[Skill("a", "", "A")]).text()
    assert text == f"{BASE}{SEP}These are the skills you have mastered:\n\n### a\n\nA"
    assert PromptBuilder(instructions=[Instruction("AGENTS.md", "x")]).build() is not None


def test_identity_default_and_file(tmp_path: Path) -> None:
    assert load_identity(tmp_path) == DEFAULT_IDENTITY
    assert DEFAULT_IDENTITY == "You are Openheim, a multipurpose, multiprovider LLM agent."
    (tmp_path / "system.md").write_text("  custom\n")
    assert load_identity(tmp_path) == "  custom\n"


def test_unreadable_identity_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "system.md").mkdir()
    with pytest.raises(ConfigError, match="system.md"):
        load_identity(tmp_path)


def test_directories_between_root_and_cwd(tmp_path: Path) -> None:
    tmp_path = tmp_path.resolve()
    assert directories(tmp_path, tmp_path / "a" / "b") == [tmp_path, tmp_path / "a", tmp_path / "a" / "b"]
    assert directories(tmp_path / "a", tmp_path) == [tmp_path / "a"]
    assert directories(tmp_path, None) == [tmp_path]


def _tree(root: Path) -> Path:
    deep = root / "pkg" / "mod" / "leaf"
    deep.mkdir(parents=True)
    (root / "AGENTS.md").write_text("root agents")
    (root / "CLAUDE.md").write_text("root claude: ignored, AGENTS.md wins")
    (root / "pkg" / "CLAUDE.md").write_text("pkg claude")
    (root / "pkg" / "mod" / "AGENTS.md").write_text("   \n")  # blank: skipped
    (root / "pkg" / "mod" / "leaf" / "AGENTS.md").write_text("leaf agents")
    (root / "other").mkdir()
    (root / "other" / "AGENTS.md").write_text("not on the path")
    return deep


def test_instructions_outermost_first_with_claude_fallback(tmp_path: Path) -> None:
    deep = _tree(tmp_path)
    found = load_instructions(tmp_path, deep)
    assert found == [
        Instruction("AGENTS.md", "root agents"),
        Instruction("pkg/CLAUDE.md", "pkg claude"),
        Instruction("pkg/mod/leaf/AGENTS.md", "leaf agents"),
    ]
    assert load_instructions(tmp_path, tmp_path / "pkg") == found[:2]
    link = tmp_path.parent / f"{tmp_path.name}-link"
    link.symlink_to(tmp_path)
    assert load_instructions(tmp_path, link / "pkg" / "mod" / "leaf") == found  # symlinked cwd spelling


def test_huge_instructions_file_is_capped(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x" * (MAX_BYTES + 10))
    [item] = load_instructions(tmp_path, tmp_path)
    assert item.content.startswith("x" * MAX_BYTES) and "[instructions truncated" in item.content


def test_memory_context_prepare(tmp_path: Path, caplog) -> None:
    data = tmp_path / "data"
    (data / "skills").mkdir(parents=True)
    (data / "skills" / "one.md").write_text("One.")
    (data / "skills" / "two.md").write_text("Two.")
    (data / "system.md").write_text("Identity.")
    root = tmp_path / "project"
    deep = _tree(root)
    memory = ConversationStore(data)
    conv = memory.history.create(skills=["one", "gone"])
    builder = memory.prepare(conv, root, deep, extra_skills=["two", "one"])
    assert [s.name for s in builder.skills] == ["one", "two"]
    assert builder.warnings and "gone" in builder.warnings[0] and "gone" in caplog.text
    text = builder.build().text()  # type: ignore[union-attr]
    assert text.index("Identity.") < text.index("root agents") < text.index("leaf agents") < text.index("One.")
    bare = memory.prepare(conv, root, deep, include_instructions=False)
    assert bare.instructions == [] and "root agents" not in bare.build().text()  # type: ignore[union-attr]


def test_memory_context_default_identity_and_dirs(tmp_path: Path) -> None:
    memory = ConversationStore(tmp_path)
    assert memory.history.dir == tmp_path / "history" and memory.skills.dir == tmp_path / "skills"
    conv = memory.history.create()
    builder = memory.prepare(conv, tmp_path, os.fspath(tmp_path))
    assert builder.identity == DEFAULT_IDENTITY and builder.build() is not None
