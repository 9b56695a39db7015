"""create_client: the LlmClient for a resolved provider config, wrapped in the retry policy."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from openheim.config.providers import KINDS
from openheim.core.llm.retry import RETRY_DELAY_ENV, RetryClient
from openheim.errors import ConfigError

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.core.llm.base import LlmClient

__all__ = ["RETRY_DELAY_ENV", "create_client"]


def _inner_client(cfg: AgentConfig) -> LlmClient:
    kind = KINDS.get(cfg.kind)
    if kind is None:
        raise ConfigError(
            f"provider '{cfg.provider_name}' has unknown kind '{cfg.kind}'; use one of {', '.join(KINDS)}"
        )
    module, _, name = kind.client.partition(":")
    client = getattr(importlib.import_module(module), name)
    if cfg.record or cfg.replay:
        from openheim.core.llm.tape import transport_for

        return client(cfg, transport_for(cfg))
    return client(cfg)


def create_client(cfg: AgentConfig, *, base_delay: float | None = None) -> LlmClient:
    """The client for ``cfg.kind`` (provider module imported on first use), with retries."""
    return RetryClient(_inner_client(cfg), base_delay=base_delay, pause=not cfg.replay)  # a replay never waits
