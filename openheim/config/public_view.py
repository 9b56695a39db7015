"""The config as it may be shown to clients (no secrets)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openheim.config.secrecy import scrub_url

if TYPE_CHECKING:
    from openheim.config.schema import Config


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
        "providers": {},
        "mcp_servers": {},
    }
    for name, p in config.providers.items():
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
        view["providers"][name] = entry
    for name, s in config.mcp_servers.items():
        entry = {
            "tool_timeout_secs": s.tool_timeout_secs,
            "env": dict.fromkeys(s.env, "<redacted>"),
            "headers": dict.fromkeys(s.headers, "<redacted>"),
        }
        if s.command:
            entry["command"] = s.command
        if s.url:
            entry["url"] = scrub_url(s.url)
        view["mcp_servers"][name] = entry
    if config.memory:
        m = config.memory
        view["memory"] = {
            k: v
            for k, v in (
                ("embedding_provider", m.embedding_provider),
                ("embedding_model", m.embedding_model),
                ("top_k", m.top_k),
            )
            if v
        }
    return view
