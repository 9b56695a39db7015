"""CLI habits: a mistyped command gets "did you mean", a prompt typed without `run` is shown how to send it, and `run --json` points to `-o json`."""

from __future__ import annotations

import pytest
from cli_helpers import openheim


@pytest.mark.parametrize(
    ("typed", "meant"), [("sesions", "'sessions'"), ("doctr", "'doctor'"), ("serv", "'serve'"), ("mempry", "'memory'")]
)
def test_a_mistyped_command_names_the_close_one(typed, meant):
    r = openheim(typed)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == f"Error: no such command '{typed}'; did you mean {meant}?"


def test_a_command_far_from_any_says_how_to_send_a_prompt():
    r = openheim("xyzzy")
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == "Error: no such command 'xyzzy'; to send a prompt: openheim run xyzzy"


def test_a_prompt_typed_without_run_is_not_sent_but_shown_how():
    r = openheim("hi there")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines()[-1] == "Error: 'hi there' is not a command; to send a prompt: openheim run 'hi there'"


@pytest.mark.parametrize(("flag", "ours"), [("--json", "-o json"), ("--stream-json", "-o stream-json")])
def test_run_json_points_to_output(flag, ours):
    r = openheim("run", flag, "hi")
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == f"Error: no such option {flag}; use {ours} (see --output)"
