"""Turning builder options into a ready Runtime: config, data dir, work_dir, tools."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.config.load import data_dir as resolve_data_dir
from openheim.config.load import load_config
from openheim.config.mcp_json import load_mcp_file
from openheim.config.private_data import secure as secure_data_dir
from openheim.config.providers import KINDS, REPLAY, infer_kind
from openheim.config.rules import RuleError, RuleSet, parse_rule
from openheim.config.schema import REPLAY_BASE, Config, McpServerConfig, ProviderConfig, sandbox_mode
from openheim.core.child_env import register_secrets
from openheim.core.tools import ToolRegistry
from openheim.errors import ConfigError
from openheim.runtime.runtime import Runtime
from openheim.runtime.services import RuntimeSettings
from openheim.sandbox.environ import scrub_initial_environ
from openheim.tools.sandbox import keep_private

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.core.llm.adapters import BlockingLlm
    from openheim.core.llm.base import LlmClient
    from openheim.core.tools import ToolHandler
    from openheim.memory.long_term import LongTermMemory

log = logging.getLogger(__name__)

_OVERRIDES = (
    "max_iterations",
    "timeout_secs",
    "max_tokens",
    "context_window",
    "max_tokens_total",
    "turn_timeout_secs",
    "max_cost",
)


def programmatic_config(opts: dict) -> Config:
    """A one-provider config from builder options (no config file)."""

    name = opts.get("provider") or "openai"
    if name == REPLAY:
        return _replay_config(opts)
    kind = KINDS[infer_kind(name)]
    defaults = kind if kind.api_base else KINDS["openai"]
    model = opts.get("model") or defaults.default_model or ""
    provider = ProviderConfig(
        name=name,
        api_base=opts.get("api_base") or defaults.api_base or "",
        default_model=model,
        models=[model],
        kind=kind.name,
        api_key=opts.get("api_key") or "",
        thinking=kind.thinking,
    )
    return Config(default_provider=name, providers={name: provider})


def _replay_config(opts: dict) -> Config:
    """``.provider("replay").replay(path)``: one provider serving the recording (see docs/pipelines.md)."""

    if not opts.get("replay"):
        raise ConfigError("provider 'replay' needs a recording; call .replay(path) on the builder")
    provider = ProviderConfig(
        name=REPLAY,
        api_base=REPLAY_BASE,
        default_model=opts.get("model") or "",
        models=[],
        kind=REPLAY,
        recording=opts["replay"],
    )
    return Config(default_provider=REPLAY, providers={REPLAY: provider})


def canonical_work_dir(path: str | Path | None) -> Path | None:
    if path is None:
        return None
    p = Path(path).expanduser()
    try:
        resolved = Path(os.path.abspath(p)).resolve(strict=True)
    except OSError as e:
        raise ConfigError(f"work_dir '{p}' is inaccessible: {e.strerror or e}") from None
    if not resolved.is_dir():
        raise ConfigError(f"work_dir '{p}' is not a directory")
    return resolved


def build_state(
    opts: dict, tools: list[ToolHandler], llm_factory: Callable[[AgentConfig], LlmClient | BlockingLlm] | None
) -> Runtime:
    config = _config(opts)
    overrides = {k: opts[k] for k in _OVERRIDES if opts.get(k) is not None}
    settings = RuntimeSettings(
        config=config,
        data_dir=resolve_data_dir(config, opts.get("data_dir")),
        work_dir=canonical_work_dir(opts.get("work_dir") or config.work_dir),
        overrides=overrides,
        secret_env_vars=frozenset(p.env_var for p in config.providers.values() if p.env_var),
        default_provider=opts.get("provider"),
        default_model=opts.get("model"),
    )
    _keep_private(settings.data_dir, config.path)
    _record_and_replay(config, opts)
    _keep_secrets_from_children(settings.secret_env_vars | {config.serve.token_env})
    config.mcp_servers = _mcp_servers(config, opts)
    register_secrets(name for server in config.mcp_servers.values() for name in server.env)
    ltm = opts.get("long_term_memory") or _long_term_memory(config, settings.data_dir)
    hidden = tuple(str(p) for p in (settings.data_dir, config.path) if p)
    registry = _build_registry(config, ltm, tools, hidden)
    state = Runtime(settings, registry, llm_factory, ltm)
    if opts.get("check_model", True):  # fail fast: model, provider, key
        state.services.resolve_model(settings.default_provider, settings.default_model)
    if config.mcp_servers:  # they connect in the background while the first prompt is prepared
        state.services.mcp.start(list(config.mcp_servers.values()))
    return state


def _config(opts: dict) -> Config:
    """The config file's (or, given a key or an api_base, the builder's own), with the builder's overrides."""
    programmatic = bool(
        opts.get("api_key")
        or opts.get("api_base")
        or (opts.get("provider") == "replay" and not opts.get("config_path"))
    )
    config = programmatic_config(opts) if programmatic else load_config(opts.get("config_path"))
    if opts.get("default_skills"):
        config.default_skills = opts["default_skills"]
    if opts.get("allow_shell") is not None:
        config.allow_shell = bool(opts["allow_shell"])
    _sandbox_overrides(config, opts)
    config.permissions = config.permissions + _builder_rules(opts)
    return config


def _keep_private(data_dir: Path, config_file: Path | None) -> None:
    """The data dir (config, keys, every project's history) and the config file are never reachable
    through a file tool or the fs channel, whatever the sandbox root."""

    secure_data_dir(data_dir)  # 0700/0600 whatever the umask; an old one is repaired once
    keep_private(data_dir)
    if config_file is not None:
        keep_private(config_file)


def _record_and_replay(config: Config, opts: dict) -> None:
    """``record``/``replay`` options onto the config, and a fresh tape for each file this build uses."""

    if opts.get("record") and opts.get("replay"):
        raise ConfigError("record and replay cannot be combined; record once, then replay that file")
    config.record = opts.get("record") or None
    replays = [p.recording for p in config.providers.values() if p.kind == REPLAY and p.recording]
    if opts.get("replay") not in replays:  # every provider replays it (a replay provider already does)
        config.replay = opts.get("replay") or None
    replays += [config.replay] if config.replay else []
    if config.record or replays:
        from openheim.core.llm import tape

        tape.start(config.record, replays)


def _builder_rules(opts: dict) -> RuleSet:
    """The builder's (and so ``openheim run --allow/--deny``'s) rules; a ConfigError names a malformed one."""

    try:
        allow = tuple(parse_rule(r, source) for r, source in opts.get("allow", ()))
        deny = tuple(parse_rule(r, source) for r, source in opts.get("deny", ()))
    except RuleError as e:
        raise ConfigError(str(e)) from None
    return RuleSet(allow, deny)


def _mcp_servers(config: Config, opts: dict) -> dict[str, McpServerConfig]:
    """config.toml's [mcp_servers], the builder's (which override them), then an --mcp-config file's
    (config names win on a collision)."""
    servers = dict(config.mcp_servers)
    servers.update(opts.get("mcp_servers") or {})
    if opts.get("mcp_config"):
        for name, server in load_mcp_file(opts["mcp_config"], "mcp-config").items():
            if name in servers:
                log.info("MCP server '%s' of %s is not used: config.toml names one too", name, opts["mcp_config"])
                continue
            servers[name] = server
    return servers


def _keep_secrets_from_children(names: frozenset[str]) -> None:
    """The key variables' values leave this process's initial environment block (/proc/PID/environ)."""

    register_secrets(names)
    scrub_initial_environ(names)


def _sandbox_overrides(config: Config, opts: dict) -> None:
    """``--sandbox``/``--sandbox-required`` (builder ``sandbox()``) over ``[sandbox]``."""

    if opts.get("sandbox_mode") is not None:
        config.sandbox.mode = sandbox_mode(opts["sandbox_mode"], "--sandbox")
    if opts.get("sandbox_required") is not None:
        config.sandbox.required = bool(opts["sandbox_required"])
    if opts.get("sandbox_network") is not None:
        config.sandbox.network = bool(opts["sandbox_network"])


def _build_registry(
    config: Config, ltm: LongTermMemory, custom: list[ToolHandler], hidden: tuple[str, ...] = ()
) -> ToolRegistry:
    from openheim.memory.tools import memory_tools
    from openheim.tools.builtins import register_builtins

    registry = ToolRegistry()
    sandbox = None
    if config.allow_shell:  # only the shell runs in the sandbox: without it, its policy is not even loaded
        from openheim.sandbox.policy import Sandbox

        sandbox = Sandbox.from_config(config.sandbox, hidden)  # data dir and config: not the commands' to read
    register_builtins(registry, allow_shell=config.allow_shell, sandbox=sandbox)
    if custom:  # code of the embedding program's own: it may start children before any built-in loads
        from openheim.tools.process import deny_inspection

        deny_inspection()
    for handler in [*memory_tools(ltm), *custom]:
        registry.register(handler)
    return registry


def _long_term_memory(config: Config, data_dir: Path) -> LongTermMemory:
    """The long-term memory [memory] configures (its database is opened on first use)."""
    from openheim.memory.setup import long_term_memory

    return long_term_memory(config, data_dir)
