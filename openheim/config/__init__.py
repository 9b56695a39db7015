"""Configuration: loading config.toml, validating it and resolving providers to an AgentConfig."""

from openheim.config.agent_config import AgentConfig
from openheim.config.load import config_path, data_dir, default_home, load_config
from openheim.config.resolve import (
    all_models,
    resolve,
    resolve_choice,
    resolve_provider_default,
    resolve_with_provider,
)
from openheim.config.schema import Config, McpServerConfig, MemoryConfig, ProviderConfig

__all__ = [
    "AgentConfig",
    "Config",
    "McpServerConfig",
    "MemoryConfig",
    "ProviderConfig",
    "all_models",
    "config_path",
    "data_dir",
    "default_home",
    "load_config",
    "resolve",
    "resolve_choice",
    "resolve_provider_default",
    "resolve_with_provider",
]
