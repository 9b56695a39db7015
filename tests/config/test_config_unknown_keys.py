"""A typo in config.toml: an unknown key names the file, the line and the nearest known key, once; doctor calls it a
problem; `run` goes on unless strict checking is on. Config errors found after loading name the file too."""

from __future__ import annotations

from cli_helpers import fake_provider, openheim, write_config

from openheim.config.unknown_keys import key_line

TYPOS = "alow_shell = true\nmax_iteration = 5\n"


def typo_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "unknown key" in line]


def test_run_goes_on_and_names_file_line_and_the_nearest_key(isolated_home, tmp_path):
    with fake_provider("openai_compatible", isolated_home, extra=TYPOS) as server:
        r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    config = isolated_home / "config.toml"
    assert typo_lines(r.stderr) == [
        f"openheim: config: {config}:2: unknown key 'alow_shell' ignored; did you mean 'allow_shell'?",
        f"openheim: config: {config}:3: unknown key 'max_iteration' ignored; did you mean 'max_iterations'?",
    ]
    assert len(server.requests) == 1


def test_a_key_of_a_provider_table_is_found_on_its_line(isolated_home, tmp_path):
    with fake_provider("openai_compatible", isolated_home, provider_extra="tiemout_secs = 3") as _:
        r = openheim("run", "hi", cwd=tmp_path)
    config = isolated_home / "config.toml"
    line = next(n for n, text in enumerate(config.read_text().splitlines(), 1) if text.startswith("tiemout_secs"))
    assert typo_lines(r.stderr) == [
        f"openheim: config: {config}:{line}: unknown key 'providers.fake.tiemout_secs' ignored; "
        "did you mean 'timeout_secs'?"
    ]


def test_strict_config_refuses_before_any_request(isolated_home, tmp_path):
    with fake_provider("openai_compatible", isolated_home, extra=TYPOS) as server:
        flag = openheim("--strict-config", "run", "hi", cwd=tmp_path)
        config = isolated_home / "config.toml"
        config.write_text(config.read_text() + "\n[config]\nstrict = true\n")
        table = openheim("run", "hi", cwd=tmp_path)
        assert server.requests == []
    for r in (flag, table):
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.strip() == (
            f"Error: Config error: {config}:2: unknown key 'alow_shell'; did you mean 'allow_shell'? "
            "(strict config checking is on: fix or remove it)"
        )


def test_doctor_shows_the_typos_once_as_a_problem(isolated_home):
    write_config(isolated_home, "http://127.0.0.1:9/v1", extra=TYPOS)
    r = openheim("doctor", "--offline")
    assert r.returncode == 1
    [config_line] = [line for line in r.stdout.splitlines() if line.split()[1:2] == ["config"]]
    assert config_line.startswith("FAIL") and "line 2 'alow_shell' (did you mean 'allow_shell'?)" in config_line
    assert "line 3 'max_iteration' (did you mean 'max_iterations'?)" in config_line
    assert r.stdout.splitlines()[-1] == "not ready: config failed"
    assert typo_lines(r.stderr) == []  # shown once, in doctor's own lines


def test_config_errors_found_after_loading_name_the_file(isolated_home, tmp_path):
    config = write_config(isolated_home, "ftp://127.0.0.1:9/v1")
    bad_scheme = openheim("run", "hi", cwd=tmp_path)
    write_config(isolated_home, "http://127.0.0.1:9/v1")
    unknown_provider = openheim("run", "--provider", "nope", "hi", cwd=tmp_path)
    config.write_text(config.read_text().replace('api_key = "sk-test-SECRET-123"', 'env_var = "UNSET_KEY_VAR_X"'))
    unset_env = openheim("run", "hi", cwd=tmp_path, env={"UNSET_KEY_VAR_X": ""})
    for r in (bad_scheme, unknown_provider, unset_env):
        assert r.returncode != 0 and r.stderr.strip().endswith(f"(in {config})"), r.stderr
    assert "must start with http:// or https://" in bad_scheme.stderr
    assert "Provider 'nope' not found" in unknown_provider.stderr
    assert "UNSET_KEY_VAR_X" in unset_env.stderr


def test_key_line_reads_tables_quoted_keys_and_comments():
    text = '# top\nname = 1\n[providers."my.llm"]\n"timeout" = 2\n[ tools ] # c\nallow_shell=true\n'
    assert key_line(text, "", "name") == 2
    assert key_line(text, "providers.my.llm", "timeout") == 4
    assert key_line(text, "tools", "allow_shell") == 6
    assert key_line(text, "tools", "nope") is None


def test_a_key_holding_control_characters_reaches_the_terminal_escaped(isolated_home, tmp_path):
    with fake_provider("openai_compatible", isolated_home, extra='"x\\u001b]52;c;aGk=\\u0007" = 1\n') as _:
        r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 0 and "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "unknown key 'x\\x1b]52;c;aGk=\\x07' ignored" in r.stderr
