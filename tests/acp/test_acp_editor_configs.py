"""docs/acp.md's editor configs (Zed, JetBrains, avante.nvim, CodeCompanion) as pasted: each parses (JSON, or Lua
checked by `luac -p`) and starts a command that exists (`openheim acp`)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_helpers import openheim

DOC = Path(__file__).resolve().parents[2] / "docs" / "acp.md"
TEXT = DOC.read_text()
JSON_BLOCKS = re.findall(r"```json\n(.*?)```", TEXT, re.S)
LUA_BLOCKS = re.findall(r"```lua\n(.*?)```", TEXT, re.S)
LUAC = shutil.which("luac5.4") or shutil.which("luac")
EDITORS = ("## Zed", "## JetBrains IDEs", "## Neovim: avante.nvim", "## Neovim: CodeCompanion")


@functools.cache
def subcommands() -> set[str]:
    r = openheim("--help")
    listed = r.stdout.split("Commands:")[1]
    return {line.split()[0] for line in listed.splitlines() if line.strip()}


def check_command(argv: list[str]) -> None:
    assert Path(argv[0]).name == "openheim", argv
    assert argv[1] in subcommands() and argv[1] in ("acp", "stdio"), argv
    assert acp_help_works(argv[1])


@functools.cache
def acp_help_works(command: str) -> bool:
    return openheim(command, "--help").returncode == 0


def test_every_editor_has_a_section():
    for heading in EDITORS:
        assert heading in TEXT
    assert len(JSON_BLOCKS) >= 2 and len(LUA_BLOCKS) >= 2


@pytest.mark.parametrize("block", JSON_BLOCKS, ids=lambda b: b.split('"')[1])
def test_json_configs_parse_and_name_openheim_acp(block):
    config = json.loads(block)
    servers = config["agent_servers"]
    (entry,) = servers.values()
    check_command([entry["command"], *entry["args"]])
    assert all(isinstance(v, str) for v in entry.get("env", {}).values())


@pytest.mark.skipif(LUAC is None and not os.environ.get("CI"), reason="luac is not installed (.ci/run installs lua5.4)")
@pytest.mark.parametrize("block", LUA_BLOCKS, ids=lambda b: b.split('"')[1])
def test_lua_configs_parse_and_name_openheim_acp(block, tmp_path):
    assert LUAC is not None, "luac is missing: .ci/run installs lua5.4"
    source = tmp_path / "config.lua"
    source.write_text(block)
    r = subprocess.run([LUAC, "-p", str(source)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    broken = tmp_path / "broken.lua"
    broken.write_text(block.replace("})", "}", 1))
    assert subprocess.run([LUAC, "-p", str(broken)], capture_output=True).returncode != 0  # the check can fail
    command = re.search(r'command = "([^"]+)",\s*args = \{ "(\w+)" \}', block)
    default = re.search(r'default = \{ "([^"]+)", "(\w+)" \}', block)
    found = command or default
    assert found is not None, block
    check_command([found.group(1), found.group(2)])
