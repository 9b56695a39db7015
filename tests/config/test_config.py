"""Config loading, validation messages, provider resolution, key resolution and secrecy."""

from __future__ import annotations

import tomllib

import pytest

from openheim.config import load_config, resolve, resolve_choice, resolve_with_provider
from openheim.config.load import config_path, data_dir
from openheim.config.public_view import public_view
from openheim.config.schema import parse_config
from openheim.config.secrecy import scrub_url
from openheim.config.template import CONFIG_TEMPLATE
from openheim.errors import ConfigError

BASE = """
default_provider = "local"
[providers.local]
api_base = "http://127.0.0.1:9/v1"
default_model = "m1"
models = ["m1", "m2"]
[providers.zeta]
api_base = "https://example.com/v1"
default_model = "z"
models = ["z", "m2"]
api_key = "sk-inline"
"""


def cfg(text: str = BASE):
    return parse_config(tomllib.loads(text))


def test_defaults_and_kind_inference():
    c = cfg()
    assert c.max_iterations == 10 and c.allow_shell is False and c.default_skills == []
    assert c.providers["local"].kind == "openai_compatible" and c.providers["local"].timeout_secs == 120
    t = parse_config(tomllib.loads(CONFIG_TEMPLATE))
    assert t.providers["anthropic"].kind == "anthropic" and t.providers["anthropic"].thinking
    assert t.providers["gemini"].api_base == "https://generativelanguage.googleapis.com/v1beta"
    assert "gemini-3.8-flash" in CONFIG_TEMPLATE and "[memory]" in CONFIG_TEMPLATE
    assert "mcp_servers" in CONFIG_TEMPLATE and "11434" in CONFIG_TEMPLATE


def test_resolution_order_and_messages():
    c = cfg()
    assert resolve(c).model == "m1" and resolve(c).provider_name == "local"
    assert resolve(c, "m2").provider_name == "local"  # first provider alphabetically
    assert resolve_with_provider(c, "zeta", "m2").api_key == "sk-inline"
    with pytest.raises(ConfigError, match="Model 'x' not found in any provider"):
        resolve(c, "x")
    with pytest.raises(
        ConfigError, match=r"Model 'x' is not allowed for provider 'zeta'. Allowed models: \['z', 'm2'\]"
    ):
        resolve_with_provider(c, "zeta", "x")
    with pytest.raises(ConfigError, match="Provider 'nope' not found in config. Available providers: local, zeta"):
        resolve_choice(c, "nope", None)


OPEN = (
    BASE
    + """
[providers.open1]
api_base = "http://127.0.0.1:9/v1"
default_model = "any"
models = []
"""
)


def test_a_model_no_provider_lists_goes_to_the_one_that_accepts_any():
    c = cfg(OPEN)
    picked = resolve(c, "llama-3-70b")
    assert (picked.provider_name, picked.model) == ("open1", "llama-3-70b")
    assert resolve(c, "m2").provider_name == "local"  # a provider listing the model still comes first


def test_several_providers_accepting_any_model_need_provider():
    c = cfg(OPEN + '[providers.open0]\napi_base = "http://127.0.0.1:9/v1"\ndefault_model = "a"\nmodels = []\n')
    with pytest.raises(ConfigError) as info:
        resolve(c, "llama-3-70b")
    assert "several accept any model (open0, open1)" in str(info.value) and "--provider" in str(info.value)
    assert resolve_choice(c, "open0", "llama-3-70b").provider_name == "open0"


def test_invalid_api_base_message_hides_credentials():
    text = (
        'default_provider = "p"\n[providers.p]\napi_base = "ftp://u:pw-HIDDEN@x/v1?key=k-HIDDEN"\n'
        'default_model = "a"\nmodels = []\n'
    )
    with pytest.raises(ConfigError, match="must start with http") as info:
        resolve(cfg(text))
    assert "HIDDEN" not in str(info.value)


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ('api_base = ""', "has an empty api_base"),
        ('api_base = "ftp://x"', "must start with http:// or https://"),
        ('api_base = "http://example.com"\napi_key = "k"', "uses http:// but has an API key"),
        ('api_base = "https://x"\ndefault_model = "q"', "default_model 'q' is not listed in models"),
    ],
)
def test_provider_validation(snippet, message):
    lines = {"api_base": 'api_base = "https://x"', "default_model": 'default_model = "a"'}
    for line in snippet.splitlines():
        lines[line.split(" =")[0]] = line
    text = 'default_provider = "p"\n[providers.p]\nmodels = ["a"]\n' + "\n".join(lines.values())
    with pytest.raises(ConfigError, match=message):
        resolve(cfg(text))


def test_http_key_allowed_on_loopback(monkeypatch):
    for host in ("127.0.0.1", "127.3.4.5", "[::1]", "localhost"):
        text = f'default_provider = "p"\n[providers.p]\napi_base = "http://{host}:1/v1"\ndefault_model = "a"\nmodels = []\napi_key = "k"'
        assert resolve(cfg(text)).api_key == "k"


def test_env_var_key_resolution(monkeypatch):
    text = 'default_provider = "openai"\n[providers.openai]\napi_base = "https://x/v1"\ndefault_model = "a"\nmodels = []\nenv_var = "MY_KEY"'
    with pytest.raises(ConfigError, match="set the MY_KEY environment variable"):
        resolve(cfg(text))
    monkeypatch.setenv("MY_KEY", "   ")
    with pytest.raises(ConfigError, match="MY_KEY"):
        resolve(cfg(text))
    monkeypatch.setenv("MY_KEY", " sk-env ")
    assert resolve(cfg(text)).api_key == "sk-env"
    assert resolve(cfg(text + '\napi_key = ""')).api_key == "sk-env"
    monkeypatch.delenv("MY_KEY")
    assert resolve(cfg(text + '\napi_key = ""')).api_key == ""  # explicitly keyless


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('default_provider = "p"\nmax_iterations = "ten"', "'max_iterations' must be an integer"),
        ('default_provider = "p"\nmax_iterations = 0', "'max_iterations' must be at least 1"),
        ('default_provider = "p"\nallow_shell = "yes"', "'allow_shell' must be true or false"),
        ("max_iterations = 3", "missing required key 'default_provider'"),
        (
            'default_provider = "p"\n[providers.p]\napi_base = "https://x"\ndefault_model = "a"\nmodels = []\nkind = "cohere"',
            "'providers.p.kind' is 'cohere'",
        ),
        (
            'default_provider = "p"\n[mcp_servers.s]\nargs = []',
            "must have either 'command' \\(stdio\\) or 'url' \\(HTTP\\)",
        ),
        (
            'default_provider = "p"\n[mcp_servers.s]\ncommand = "x"\ntool_timeout_secs = 0',
            "tool_timeout_secs = 0; it must be at least 1",
        ),
        ('default_provider = "p"\n[mcp_servers.s]\nurl = "http://x"\nheaders = {A = "b"}', "unencrypted"),
        (
            'default_provider = "p"\n[memory]\nembedding_model = "e"',
            r"\[memory\] embedding_model is set but embedding_provider is not",
        ),
        ('default_provider = "p"\n[memory]\nembedding_provider = "p"', r"\[memory\] embedding_model is required"),
        ('default_provider = "p"\n[memory]\ndb_path = "rel/x.db"', "must be an absolute path"),
    ],
)
def test_validation_messages(text, message):
    with pytest.raises(ConfigError, match=message):
        cfg(text)


def test_memory_top_k_zero_clamps_to_five():
    assert cfg('default_provider = "p"\n[memory]\ntop_k = 0').memory.top_k == 5


def test_locations(monkeypatch, tmp_path, isolated_home):
    assert config_path() == isolated_home / "config.toml"
    monkeypatch.setenv("OPENHEIM_CONFIG", str(tmp_path / "c.toml"))
    assert config_path() == tmp_path / "c.toml"
    assert config_path(tmp_path / "x.toml") == tmp_path / "x.toml"
    c = cfg()
    assert data_dir(c) == isolated_home
    c.data_dir = tmp_path / "d"
    assert data_dir(c) == tmp_path / "d" and data_dir(c, tmp_path / "b") == tmp_path / "b"


def test_load_errors(tmp_path):
    with pytest.raises(ConfigError, match="Run `openheim init` to create one"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("default_provider = \n")
    with pytest.raises(ConfigError, match="TOML parse error"):
        load_config(bad)


def test_secrecy():
    assert scrub_url("https://user:pw@host:8443/v1?key=s#f") == "https://host:8443/v1"
    assert scrub_url("not a url") == "<redacted>"
    c = cfg(BASE + '\n[mcp_servers.s]\ncommand = "srv"\nargs = ["--token", "t0ps3cret"]\nenv = {TOKEN = "abc"}\n')
    text = repr(c) + repr(public_view(c, "/w"))
    assert "sk-inline" not in text and "t0ps3cret" not in text and "abc" not in text
    assert "<redacted>" in text and "data_dir" not in public_view(c, "/w")
    agent = resolve_with_provider(c, "zeta", "z")
    assert "sk-inline" not in repr(agent) and "sk-inline" not in str(agent)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'default_provider = "p"\n[providers.p]\napi_base = "https://x"\ndefault_model = "a"\nmodels = []\n'
            "timeout_secs = 9223372036854775807",
            "'providers.p.timeout_secs' must be at most 86400",
        ),
        (
            'default_provider = "p"\n[mcp_servers.s]\ncommand = "x"\ntool_timeout_secs = 9223372036854775807',
            "'mcp_servers.s.tool_timeout_secs' must be at most 86400",
        ),
        ('default_provider = "p"\nmemory = 3', r"'memory' must be a table \(\[memory\]\)"),
        ('default_provider = "p"\nmemory = "x"', r"'memory' must be a table"),
    ],
)
def test_values_that_used_to_pass_validation(text, message):
    with pytest.raises(ConfigError, match=message):
        cfg(text)


def test_data_dir_that_is_a_file_is_a_config_error(tmp_path):
    c = cfg()
    c.data_dir = tmp_path / "afile"
    c.data_dir.write_text("x")
    with pytest.raises(ConfigError, match=f"the data directory {c.data_dir} is a file, not a directory"):
        data_dir(c)


def _limited_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a regression fails fast instead of eating RAM


def test_cli_rejects_an_overflowing_timeout_with_one_line(isolated_home, tmp_path):
    """It used to pass validation, then fail every retry with OverflowError."""
    from cli_helpers import openheim, write_config
    from fake_llm import FakeLLMServer

    with FakeLLMServer(wire="openai") as srv:
        path = write_config(isolated_home, srv.base_url)
        path.write_text(path.read_text().replace("timeout_secs = 5", "timeout_secs = 9223372036854775807"))
        r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"Error: Config error: 'providers.fake.timeout_secs' must be at most 86400, got 9223372036854775807 (in {path})"
    ]
    assert srv.requests == []


def test_cli_memory_that_is_not_a_table(isolated_home, tmp_path):
    from cli_helpers import openheim, write_config

    write_config(isolated_home, "http://127.0.0.1:9/v1", extra="memory = 3")
    r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 2 and "'memory' must be a table ([memory])" in r.stderr


def test_a_config_that_is_dev_zero_is_refused_quickly(isolated_home, tmp_path):
    import subprocess
    import sys

    from cli_helpers import ROOT

    link = tmp_path / "config.toml"
    link.symlink_to("/dev/zero")
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "openheim", "--config", str(link), "run", "hi"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
        preexec_fn=_limited_memory,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"Error: Config error: config file {link} is not a regular file (a "
        "device, FIFO or directory); point --config (or OPENHEIM_CONFIG) at "
        "your config.toml"
    ]
