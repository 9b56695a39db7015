"""Wiring [memory] config to a LongTermMemory (opened on first use)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openheim.config.resolve import resolve_api_key, validate_provider
from openheim.errors import ConfigError
from openheim.memory.long_term import LongTermMemory

if TYPE_CHECKING:
    from openheim.config.schema import Config
    from openheim.memory.embedding import EmbeddingClient


def embedder_for(config: Config) -> EmbeddingClient | None:
    """The embeddings client [memory] names, or None (keyword search only)."""
    memory = config.memory
    if memory is None or not memory.embedding_provider:
        return None
    from openheim.memory.embedding import embedding_client_for

    provider = config.providers.get(memory.embedding_provider)
    if provider is None:
        raise ConfigError(
            f"[memory] embedding_provider '{memory.embedding_provider}' is not a configured provider; "
            f"add [providers.{memory.embedding_provider}] or fix the name"
        )
    key = resolve_api_key(provider)
    validate_provider(provider, key)
    return embedding_client_for(
        provider.kind,
        provider.api_base.rstrip("/"),
        key,
        memory.embedding_model or "",
        provider.timeout_secs,
        provider.name,
    )


def long_term_memory(config: Config, data_dir: Path) -> LongTermMemory:
    memory = config.memory
    db_path = memory.db_path if memory and memory.db_path else data_dir / "memory.db"
    return LongTermMemory(db_path, embedder_for(config), memory.top_k if memory else 5)
