"""create_client by kind, and the lazy-import discipline of the LLM layer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from openheim.config.agent_config import AgentConfig
from openheim.core.llm.factory import RETRY_DELAY_ENV, create_client
from openheim.core.llm.retry import RetryClient
from openheim.errors import ConfigError


@pytest.mark.parametrize(
    "kind,cls,url",
    [
        ("openai", "OpenAIClient", "https://api.example/v1/chat/completions"),
        ("openai_compatible", "OpenAIClient", "https://api.example/v1/chat/completions"),
        ("anthropic", "AnthropicClient", "https://api.example/v1/messages"),
        ("gemini", "GeminiClient", "https://api.example/v1/models/m-1:streamGenerateContent?alt=sse"),
    ],
)
def test_kind_selects_wire_client_wrapped_in_retry(kind, cls, url):
    client = create_client(AgentConfig("prov", kind, "https://api.example/v1/", "k", "m-1"))
    assert isinstance(client, RetryClient) and type(client.inner).__name__ == cls
    assert (client.provider_name, client.model, client.inner.url) == ("prov", "m-1", url)


def test_unknown_kind_is_config_error():
    with pytest.raises(ConfigError, match="unknown kind 'soap'"):
        create_client(AgentConfig("p", "soap", "https://x", "", "m"))


def test_retry_base_delay_from_environment(monkeypatch):
    monkeypatch.setenv(RETRY_DELAY_ENV, "0.01")
    assert create_client(AgentConfig("p", "openai", "https://x", "", "m")).base_delay == 0.01
    monkeypatch.setenv(RETRY_DELAY_ENV, "bogus")
    assert create_client(AgentConfig("p", "openai", "https://x", "", "m")).base_delay == 1.0


def test_factory_import_is_light():
    code = (
        "import sys, openheim.core.llm.factory, openheim.core.llm.retry; "
        "print(sorted(m for m in ('requests', 'sseclient', 'urllib3') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_key_never_in_repr():
    assert "sk-secret" not in repr(create_client(AgentConfig("p", "openai", "https://x", "sk-secret", "m")).inner.cfg)
