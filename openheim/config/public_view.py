"""The config as it may be shown to clients (no secrets)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openheim.config.secrecy import scrub_url

if TYPE_CHECKING:
    from openheim.config.schema import Config, McpServerConfig, ProviderConfig


def public_view(config: Config, work_dir: str) -> dict:
    """The config as it may be shown to clients: no keys, no data_dir, scrubbed URLs, MCP args omitted."""
    view: dict = {
        "default_provider": config.default_provider,
        "max_iterations": config.max_iterations,
        "work_dir": work_dir,
        "allow_shell": config.allow_shell,
        "sandbox": {
            "mode": config.sandbox.mode,
            "network": config.sandbox.network,
            "required": config.sandbox.required,
        },
        "tui": {"theme_color": config.theme_color} if config.theme_color else {},
        "providers": {name: provider_view(p) for name, p in config.providers.items()},
        "mcp_servers": {name: mcp_server_view(s) for name, s in config.mcp_servers.items()},
    }
    if config.memory:
        m = config.memory
        shown = (
            ("embedding_provider", m.embedding_provider),
            ("embedding_model", m.embedding_model),
            ("top_k", m.top_k),
        )
        view["memory"] = {k: v for k, v in shown if v}
    return view


def provider_view(p: ProviderConfig) -> dict:
    entry: dict = {
        "kind": p.kind,
        "api_base": scrub_url(p.api_base),
        "default_model": p.default_model,
        "models": p.models,
        "timeout_secs": p.timeout_secs,
    }
    for key in ("env_var", "max_tokens", "context_window"):
        if getattr(p, key) is not None:
            entry[key] = getattr(p, key)
    return entry


def mcp_server_view(s: McpServerConfig) -> dict:
    entry: dict = {
        "tool_timeout_secs": s.tool_timeout_secs,
        "env": dict.fromkeys(s.env, "<redacted>"),
        "headers": dict.fromkeys(s.headers, "<redacted>"),
    }
    if s.command:
        entry["command"] = s.command
    if s.url:
        entry["url"] = scrub_url(s.url)
    return entry
