"""The provider kinds openheim speaks: one table used by config validation, the client factory,
programmatic mode and long-term memory's embeddings."""

from __future__ import annotations

from dataclasses import dataclass

from openheim.errors import ConfigError


@dataclass
class ProviderKind:
    """A kind of provider: its client class and conventional defaults."""

    name: str
    client: str  # "module:Class" of its LlmClient, imported on first use
    api_base: str | None  # built-in default base URL; None: it must be configured
    default_model: str | None
    key_env: str | None  # the conventional API-key environment variable
    embeddings: str | None  # the embeddings API it speaks ("openai", "gemini"), or None
    thinking: bool = False  # extended thinking on unless the config says otherwise


_OPENAI_CLIENT = "openheim.core.llm.openai:OpenAIClient"
REPLAY = "replay"

KINDS: dict[str, ProviderKind] = {
    k.name: k
    for k in (
        ProviderKind("openai", _OPENAI_CLIENT, "https://api.openai.com/v1", "gpt-4o", "OPENAI_API_KEY", "openai"),
        ProviderKind(
            "anthropic",
            "openheim.core.llm.anthropic:AnthropicClient",
            "https://api.anthropic.com/v1",
            "claude-sonnet-4-6",
            "ANTHROPIC_API_KEY",
            None,
            thinking=True,
        ),
        ProviderKind(
            "gemini",
            "openheim.core.llm.gemini:GeminiClient",
            "https://generativelanguage.googleapis.com/v1beta",
            "gemini-3.8-flash",
            "GEMINI_API_KEY",
            "gemini",
        ),
        ProviderKind("openai_compatible", _OPENAI_CLIENT, None, None, None, "openai"),
        # serves a recording back (``recording = "path"``); it speaks the wire of the kind it was recorded from
        ProviderKind(REPLAY, "", None, None, None, None),
    )
}
COMPATIBLE = "openai_compatible"


def infer_kind(provider_name: str) -> str:
    """A provider named after a built-in kind is that kind; anything else is OpenAI-compatible."""
    kind = KINDS.get(provider_name)
    return kind.name if kind is not None and kind.api_base else COMPATIBLE


def provider_kind(name: str, where: str = "kind") -> ProviderKind:
    """The kind called ``name``, or a ConfigError listing the kinds there are."""
    kind = KINDS.get(name)
    if kind is None:
        raise ConfigError(f"'{where}' is '{name}'; use one of: {', '.join(KINDS)}")
    return kind
