"""Provider/model resolution and provider validation, producing an AgentConfig."""

from __future__ import annotations

import logging
import os
from urllib.parse import urlsplit

from openheim.config.agent_config import AgentConfig
from openheim.config.long_sessions import default_context_window
from openheim.config.loopback import is_loopback
from openheim.config.providers import REPLAY, provider_kind
from openheim.config.schema import Config, ProviderConfig
from openheim.config.secrecy import shown_url
from openheim.errors import ConfigError

log = logging.getLogger(__name__)
_warned_userinfo: set[str] = set()


def resolve_api_key(p: ProviderConfig) -> str:
    """env var (when set and non-blank) > inline api_key > "" (a keyless endpoint).

    A provider that names an env_var which is unset, and has no api_key, is an error naming that variable.
    """
    if p.env_var:
        value = os.environ.get(p.env_var, "").strip()
        if value:
            return value
        if p.api_key is None:
            raise ConfigError(
                f"Provider '{p.name}' needs an API key: set the {p.env_var} environment variable "
                f"(or api_key in config.toml)"
            )
    return p.api_key or ""


def key_problem(p: ProviderConfig) -> str | None:
    """Why ``p`` cannot be used for want of a key, in a few words (None: it has one, or needs none)."""
    try:
        resolve_api_key(p)
    except ConfigError:
        return f"no API key: set {p.env_var}"
    return None


def validate_provider(p: ProviderConfig, api_key: str) -> None:
    base = p.api_base.strip()
    if not base:
        raise ConfigError(f"Provider '{p.name}' has an empty api_base")
    if not (base.startswith(("http://", "https://"))):
        raise ConfigError(f"Provider '{p.name}' api_base '{shown_url(base)}' must start with http:// or https://")
    try:
        urlsplit(base).port  # noqa: B018  (an unclosed [IPv6 or a bad port raises)
    except ValueError as e:
        raise ConfigError(
            f"Provider '{p.name}' api_base '{shown_url(base)}' is not a valid URL ({e}); write it like "
            "https://api.example.com/v1"
        ) from None
    if "@" in urlsplit(base).netloc and p.name not in _warned_userinfo:
        _warned_userinfo.add(p.name)
        log.warning(
            "provider '%s': the user name and password in api_base are never sent; put the key in api_key or env_var",
            p.name,
        )
    if base.startswith("http://") and api_key and not is_loopback(urlsplit(base).hostname or ""):
        raise ConfigError(
            f"Provider '{p.name}' uses http:// but has an API key configured; credentials must "
            "not be sent over an unencrypted connection (use https://, or a loopback address)"
        )
    if p.models and p.default_model not in p.models:
        raise ConfigError(f"Provider '{p.name}' default_model '{p.default_model}' is not listed in models: {p.models}")


def _provider(config: Config, name: str) -> ProviderConfig:
    p = config.providers.get(name)
    if p is None:
        available = ", ".join(config.providers) or "(none)"
        raise ConfigError(
            in_config_file(config, f"Provider '{name}' not found in config. Available providers: {available}")
        )
    return p


def in_config_file(config: Config, message: str) -> str:
    """``message`` naming the config file it is about (when it was loaded from one and does not say so)."""
    if config.path is None or str(config.path) in message:
        return message
    return f"{message} (in {config.path})"


def agent_config(config: Config, p: ProviderConfig, model: str) -> AgentConfig:
    if p.kind == REPLAY:
        return _replay_config(config, p, model)
    try:
        key = "" if config.replay else resolve_api_key(p)  # a replay sends nothing: no key needed
        validate_provider(p, key)
    except ConfigError as e:
        raise ConfigError(in_config_file(config, e.message)) from None
    return AgentConfig(
        provider_name=p.name,
        kind=p.kind,
        api_base=p.api_base.rstrip("/"),
        api_key=key,
        model=model,
        max_iterations=config.max_iterations,
        max_tokens_total=config.max_tokens_total,
        turn_timeout_secs=config.turn_timeout_secs,
        max_parallel_tools=config.max_parallel_tools,
        timeout_secs=p.timeout_secs,
        max_tokens=p.max_tokens,
        context_window=context_window_of(p, model),
        thinking=p.thinking,
        record=config.record,
        replay=config.replay,
        price=config.prices.get(f"{p.name}/{model}"),
        max_cost=config.max_cost,
    )


def context_window_of(p: ProviderConfig, model: str) -> int | None:
    """The model's context window: its ``context_windows`` entry, the provider's ``context_window``, or the
    known default of the provider's kind."""
    return p.context_windows.get(model) or p.context_window or default_context_window(p.kind)


def _replay_config(config: Config, p: ProviderConfig, model: str) -> AgentConfig:
    """A ``kind = "replay"`` provider: the recorded provider's wire, model and request settings."""
    from openheim.config.recording_file import read_header

    recording = p.recording or ""
    header = read_header(recording)
    kind = provider_kind(str(header.get("kind")), f"kind in the header of recording {recording}")
    if kind.name == REPLAY:
        raise ConfigError(f"recording {recording} names kind 'replay'; record it from a real provider")
    max_tokens = header.get("max_tokens")
    return AgentConfig(
        provider_name=p.name,
        kind=kind.name,
        api_base=p.api_base.rstrip("/"),
        api_key="",
        model=model or str(header.get("model") or ""),
        max_iterations=config.max_iterations,
        max_tokens_total=config.max_tokens_total,
        turn_timeout_secs=config.turn_timeout_secs,
        max_parallel_tools=config.max_parallel_tools,
        timeout_secs=p.timeout_secs,
        max_tokens=p.max_tokens or (max_tokens if isinstance(max_tokens, int) else None),
        context_window=p.context_window,
        thinking=bool(header.get("thinking")),
        record=config.record,
        replay=recording,
        price=config.prices.get(f"{p.name}/{model}"),
        max_cost=config.max_cost,
    )


def resolve(config: Config, model: str | None = None) -> AgentConfig:
    """No model: the default provider's default model. A model: the first provider (by name) listing it,
    else the one provider whose ``models = []`` accepts any model."""
    if model is None:
        return resolve_provider_default(config, config.default_provider)
    for name in sorted(config.providers):
        if model in config.providers[name].models:
            return agent_config(config, config.providers[name], model)
    open_ = sorted(name for name, p in config.providers.items() if not p.models)
    if len(open_) == 1:
        return agent_config(config, config.providers[open_[0]], model)
    if open_:
        names = ", ".join(open_)
        raise ConfigError(
            f"Model '{model}' is listed by no provider, and several accept any model ({names}); "
            f"pick one with --provider, e.g. --provider {open_[0]}"
        )
    raise ConfigError(
        in_config_file(config, f"Model '{model}' not found in any provider; check the [providers] section")
    )


def resolve_with_provider(config: Config, provider: str, model: str) -> AgentConfig:
    p = _provider(config, provider)
    if p.models and model not in p.models:
        raise ConfigError(f"Model '{model}' is not allowed for provider '{provider}'. Allowed models: {p.models}")
    return agent_config(config, p, model)


def resolve_provider_default(config: Config, provider: str) -> AgentConfig:
    p = _provider(config, provider)
    return agent_config(config, p, p.default_model)


def resolve_choice(config: Config, provider: str | None, model: str | None) -> AgentConfig:
    """The CLI's --provider/--model combination."""
    if provider and model:
        return resolve_with_provider(config, provider, model)
    if provider:
        return resolve_provider_default(config, provider)
    return resolve(config, model)


def all_models(config: Config) -> list[tuple[str, str]]:
    """(provider, model) pairs, sorted; a provider without a models list offers its default."""
    pairs = {(name, m) for name, p in config.providers.items() for m in (p.models or [p.default_model])}
    return sorted(pairs)
