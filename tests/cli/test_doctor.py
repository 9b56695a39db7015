"""`openheim doctor` end to end: the real CLI as a subprocess, its JSON facts, lines and exit codes."""

from __future__ import annotations

import json
import sys

from cli_helpers import openheim, write_config
from mcp_helpers import new_tag, pids_with, toml_server, wait_until

SECRET = "sk-test-SECRET-123"


def doctor_json(*args: str, env: dict | None = None) -> tuple[int, dict]:
    r = openheim("doctor", "--json", "--offline", *args, env=env)
    assert r.stderr == "" or "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(r.stdout)


def test_all_well_exits_0_and_names_where_things_are(isolated_home):
    write_config(isolated_home, "http://127.0.0.1:9/v1")
    code, facts = doctor_json()
    assert code == 0, facts
    assert facts["ok"] is True and facts["exit_code"] == 0
    assert facts["home"] == {**facts["home"], "path": str(isolated_home), "from": "OPENHEIM_HOME"}
    assert facts["config"]["path"] == str(isolated_home / "config.toml") and facts["config"]["loaded"]
    assert facts["data_dir"]["path"] == str(isolated_home) and facts["data_dir"]["writable"]
    [fake] = facts["providers"]
    assert fake == {
        **fake,
        "name": "fake",
        "default": True,
        "kind": "openai_compatible",
        "status": "ok",
        "api_base": "http://127.0.0.1:9/v1",
        "default_model": "fake-model",
        "key_present": True,
        "key_from": "config",
    }
    assert facts["mcp"] == {"status": "ok", "detail": "no servers configured", "servers": []}
    assert facts["version"]["frozen"] is False
    assert facts["version"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert facts["locale"]["utf8"] is True
    assert facts["terminal"]["stdout_tty"] is False
    for key in ("status", "path", "from", "exists", "loadable", "certificates"):
        assert key in facts["ca_bundle"]


def test_no_config_fails_with_the_fix(isolated_home):
    r = openheim("doctor", "--offline")
    assert r.returncode == 1
    config_line = next(line for line in r.stdout.splitlines() if "config" in line.split()[1:2])
    assert config_line.startswith("FAIL") and "openheim init" in config_line
    assert r.stdout.splitlines()[-1] == "not ready: config failed"


def test_key_sources_are_named_and_values_never_shown(isolated_home):
    (isolated_home / "config.toml").write_text(
        'default_provider = "openai"\n'
        '[providers.openai]\napi_base = "https://api.openai.com/v1"\ndefault_model = "gpt-4o"\n'
        'env_var = "OPENAI_API_KEY"\n'
        '[providers.anthropic]\napi_base = "https://api.anthropic.com/v1"\ndefault_model = "claude"\n'
        f'api_key = "{SECRET}"\n'
        '[providers.gemini]\napi_base = "https://generativelanguage.googleapis.com/v1beta"\n'
        'default_model = "gemini-x"\nenv_var = "GEMINI_API_KEY"\n'
        '[providers.local]\nkind = "openai_compatible"\napi_base = "http://127.0.0.1:9/v1"\n'
        'default_model = "m"\n'
    )
    env = {"OPENAI_API_KEY": "sk-env-SECRET-456"}
    code, facts = doctor_json(env=env)
    human = openheim("doctor", "--offline", env=env)
    by_name = {p["name"]: p for p in facts["providers"]}
    assert by_name["openai"] == {
        **by_name["openai"],
        "status": "ok",
        "key_from": "env:OPENAI_API_KEY",
        "default": True,
        "kind": "openai",
    }
    assert by_name["anthropic"] == {**by_name["anthropic"], "status": "ok", "key_from": "config"}
    assert by_name["gemini"] == {**by_name["gemini"], "status": "info", "key_present": False, "key_from": None}
    assert "GEMINI_API_KEY" in by_name["gemini"]["error"]
    assert by_name["local"] == {**by_name["local"], "status": "ok", "key_present": False}  # keyless endpoint
    assert code == 0 and human.returncode == 0  # only a non-default provider lacks its key: not even a warning
    line = next(x for x in human.stdout.splitlines() if "provider gemini" in x)
    assert line.startswith("--    provider gemini") and line.endswith("not set up: set $GEMINI_API_KEY to use it")
    for text in (json.dumps(facts), human.stdout, human.stderr):
        assert SECRET not in text and "sk-env-SECRET-456" not in text


def test_default_provider_without_key_fails(isolated_home):
    (isolated_home / "config.toml").write_text(
        'default_provider = "anthropic"\n[providers.anthropic]\napi_base = "https://api.anthropic.com/v1"\n'
        'default_model = "claude"\n'
    )
    code, facts = doctor_json()
    assert code == 1 and facts["ok"] is False
    [p] = facts["providers"]
    assert p["status"] == "fail" and "ANTHROPIC_API_KEY" in p["error"]
    r = openheim("doctor", "--offline")
    line = next(x for x in r.stdout.splitlines() if "provider anthropic (default)" in x)
    assert line.startswith("FAIL  provider anthropic (default)  anthropic https://api.anthropic.com/v1")


def test_missing_ca_bundle_fails_and_an_empty_one_is_not_loadable(isolated_home, tmp_path):
    write_config(isolated_home, "http://127.0.0.1:9/v1")
    code, facts = doctor_json(env={"REQUESTS_CA_BUNDLE": str(tmp_path / "nope.pem")})
    assert code == 1
    assert facts["ca_bundle"] == {
        **facts["ca_bundle"],
        "status": "fail",
        "exists": False,
        "from": "REQUESTS_CA_BUNDLE",
        "path": str(tmp_path / "nope.pem"),
    }
    (tmp_path / "empty.pem").write_text("not a certificate\n")
    code, facts = doctor_json(env={"REQUESTS_CA_BUNDLE": str(tmp_path / "empty.pem")})
    assert code == 1 and facts["ca_bundle"]["exists"] and not facts["ca_bundle"]["loadable"]


def test_default_ca_bundle_is_the_one_requests_uses(isolated_home):
    import requests.utils

    write_config(isolated_home, "http://127.0.0.1:9/v1")
    code, facts = doctor_json(env={"REQUESTS_CA_BUNDLE": "", "CURL_CA_BUNDLE": ""})
    assert code == 0, facts["ca_bundle"]
    assert facts["ca_bundle"]["path"] == requests.utils.DEFAULT_CA_BUNDLE_PATH
    assert facts["ca_bundle"]["from"] == "certifi" and facts["ca_bundle"]["certificates"] > 10


def test_mcp_servers_are_started_checked_and_stopped(isolated_home):
    tag = new_tag()
    write_config(
        isolated_home,
        "http://127.0.0.1:9/v1",
        extra="",
        provider_extra=toml_server("good", tag) + '\n[mcp_servers.broken]\ncommand = "/nonexistent/mcp-server"\n',
    )
    code, facts = doctor_json("--timeout", "20")
    servers = {s["name"]: s for s in facts["mcp"]["servers"]}
    assert servers["good"]["connected"] and servers["good"]["tool_count"] > 0
    assert not servers["broken"]["connected"]
    assert facts["mcp"]["status"] == "warn" and code == 0  # a broken optional server is a warning
    assert wait_until(lambda: not pids_with(tag), timeout=5)


def test_vectors_name_the_sqlite_library(isolated_home):
    from openheim.memory.sqlite import select_driver

    write_config(isolated_home, "http://127.0.0.1:9/v1")
    _code, facts = doctor_json()
    driver = select_driver()
    assert facts["vectors"]["available"] is driver.vectors
    assert facts["vectors"]["driver"] == driver.name
    assert facts["vectors"]["sqlite_version"] == driver.module.sqlite_version
    if driver.vectors:
        assert facts["vectors"]["status"] == "ok" and facts["vectors"]["vec_version"].startswith("v")
        assert facts["vectors"]["library"].endswith(".so") or ".so." in facts["vectors"]["library"]


def test_human_lines_are_aligned(isolated_home):
    write_config(isolated_home, "http://127.0.0.1:9/v1")
    r = openheim("doctor", "--offline")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1].startswith("ready")
    checks = lines[:-1]
    assert [x.split()[1] for x in checks][:3] == ["version", "home", "config"]
    assert all(x[:6] in ("ok    ", "warn  ", "FAIL  ", "--    ") for x in checks), checks
    detail_column = {len(x) - len(x[6:].split("  ", 1)[1].lstrip()) for x in checks}
    assert len(detail_column) == 1, checks


def test_a_server_that_never_answers_is_bounded_by_timeout(isolated_home):
    import time

    write_config(
        isolated_home,
        "http://127.0.0.1:9/v1",
        provider_extra='\n[mcp_servers.mute]\ncommand = "/bin/sleep"\nargs = ["600"]\n',
    )
    start = time.monotonic()
    code, facts = doctor_json("--timeout", "1")
    assert time.monotonic() - start < 15
    [mute] = facts["mcp"]["servers"]
    assert mute["name"] == "mute" and not mute["connected"] and facts["mcp"]["status"] == "warn"
    assert code == 0
