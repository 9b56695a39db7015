"""Helpers for the long-session tests: a fake model that writes summaries, a file-changing turn, tree snapshots."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from fake_llm import FakeLLMServer, Reply, ToolCall

SUMMARY = "## Goals\nkeep counting turns\n## Files touched\nnone\n## What remains\nthe next turn"


def is_summary_request(body: Any) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and "compacting a long conversation" in str(messages[0].get("content"))


class SummarisingServer(FakeLLMServer):
    """A fake OpenAI-wire model that answers every compaction request with SUMMARY, out of the scripted queue."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(wire="openai", **kwargs)
        self.summary_requests: list[Any] = []

    def next_item(self, body: Any) -> Reply:
        if is_summary_request(body):
            self.summary_requests.append(body)
            return Reply(text=SUMMARY)
        return super().next_item(body)  # type: ignore[return-value]


def seed_tree(root: Path) -> None:
    """The files a file-changing turn finds: one to edit, one deleted by a tool, one deleted by the shell."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "keep.txt").write_text("unchanged\n")
    (root / "edit_me.txt").write_text("alpha\nbeta\ngamma\n")
    (root / "doomed.txt").write_text("to be deleted by the shell\n")
    (root / "overwritten.txt").write_text("first version\n")
    (root / ".gitignore").write_text("build/\n")
    (root / "build").mkdir(exist_ok=True)
    (root / "build" / "out.bin").write_text("ignored build output\n")


def changing_turn() -> list[Reply]:
    """A turn that adds two files (tool and shell), edits one, overwrites one and deletes one with the shell."""
    return [
        Reply(
            tool_calls=[
                ToolCall("write_file", {"path": "new/added.txt", "content": "brand new\n"}, id="w1"),
                ToolCall("edit_file", {"path": "edit_me.txt", "old_string": "beta", "new_string": "BETA"}, id="e1"),
                ToolCall("write_file", {"path": "overwritten.txt", "content": "second version\n"}, id="w2"),
            ]
        ),
        Reply(
            tool_calls=[
                ToolCall("execute_command", {"command": "rm doomed.txt && echo made > shell_made.txt"}, id="x1")
            ]
        ),
        Reply(text="done changing files"),
    ]


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (but .git) with its text: what an exact undo must bring back."""
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.invalid",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.invalid",
            "HOME": str(root),
            "PATH": "/usr/bin:/bin",
        },
    ).stdout
