"""The config file's shape: dataclasses parsed from the TOML dict with clear validation messages."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from openheim.config.hooks import HookSpec, parse_hooks
from openheim.config.long_sessions import (
    CheckpointConfig,
    CompactionConfig,
    parse_checkpoints,
    parse_compaction,
)
from openheim.config.loopback import is_loopback
from openheim.config.prices import Price, parse_prices
from openheim.config.providers import REPLAY, infer_kind, provider_kind
from openheim.config.rules import RuleError, RuleSet, parse_rules
from openheim.config.secrecy import scrub_url
from openheim.config.toml_values import (
    get_bool,
    get_int,
    get_seconds,
    get_str,
    get_str_list,
    get_str_map,
    get_table,
    present_int,
    warn_unknown,
)
from openheim.errors import ConfigError

log = logging.getLogger(__name__)

MAX_TIMEOUT_SECS = 24 * 3600  # a day; far larger values overflow the socket layer
REPLAY_BASE = "http://replay.invalid"  # a replay provider's api_base: never contacted


@dataclass  # its own __repr__ hides the key
class ProviderConfig:
    """One ``[providers.NAME]`` table."""

    name: str
    api_base: str
    default_model: str
    models: list[str]
    kind: str
    env_var: str | None = None
    api_key: str | None = None
    timeout_secs: int = 120
    max_tokens: int | None = None
    context_window: int | None = None
    thinking: bool = False
    recording: str | None = None  # kind "replay": the recording it serves
    context_windows: dict[str, int] = field(default_factory=dict)  # per model, over context_window

    def __repr__(self) -> str:
        key = "<redacted>" if self.api_key else ""
        return (
            f"ProviderConfig(name={self.name!r}, kind={self.kind!r}, api_base={scrub_url(self.api_base)!r}, "
            f"default_model={self.default_model!r}, models={self.models!r}, env_var={self.env_var!r}, "
            f"api_key={key!r}, timeout_secs={self.timeout_secs})"
        )


@dataclass  # its own __repr__ hides env and header values
class McpServerConfig:
    """One MCP server: stdio (``command``) or streamable HTTP (``url``, which wins when both are set)."""

    name: str
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    tool_timeout_secs: int = 600
    sandbox: str = "off"  # a stdio server may run sandboxed: read-only | workspace-write | off
    source: str = "config"  # config ([mcp_servers], builder) | mcp-config (--mcp-config) | project | session
    cwd: Path | None = None  # where a stdio server starts (None: openheim's own directory)
    sse: bool = False  # with url: the older HTTP+SSE transport instead of streamable HTTP

    @property
    def transport(self) -> str:
        return ("sse" if self.sse else "http") if self.url else "stdio" if self.command else "unknown"

    def __repr__(self) -> str:
        return (
            f"McpServerConfig(name={self.name!r}, command={self.command!r}, args=<{len(self.args)} redacted>, "
            f"env={sorted(self.env)!r}, url={scrub_url(self.url) if self.url else None!r}, "
            f"headers={sorted(self.headers)!r}, tool_timeout_secs={self.tool_timeout_secs}, "
            f"source={self.source!r})"
        )


SANDBOX_MODES = ("read-only", "workspace-write", "off")


@dataclass
class SandboxConfig:
    """The ``[sandbox]`` table: how the kernel confines the commands openheim starts for the model."""

    mode: str = "workspace-write"  # read-only | workspace-write | off
    network: bool = False  # TCP and UDP sockets
    writable_roots: list[str] = field(default_factory=list)  # extra absolute directories (workspace-write)
    required: bool = False  # refuse commands when the kernel cannot enforce the mode
    keep_env: list[str] = field(default_factory=list)  # channel variables (TMUX, SSH_AUTH_SOCK, ...) to keep
    allow_unix_sockets: list[str] | bool = field(default_factory=list)  # named sockets a command may reach
    limits: dict[str, int] = field(default_factory=dict)  # address_space_mb, file_size_mb, processes, cpu_secs


@dataclass
class MemoryConfig:
    """The ``[memory]`` table."""

    embedding_provider: str | None = None
    embedding_model: str | None = None
    db_path: Path | None = None
    top_k: int = 5


@dataclass
class ServeConfig:
    """`openheim serve`: where it listens, which variable holds its token, which origins may call it."""

    host: str | None = None
    port: int | None = None
    token_env: str = "OPENHEIM_SERVE_TOKEN"
    cors_origins: list[str] = field(default_factory=list)
    allow_client_mcp_commands: bool = False  # may a client's session/new start stdio MCP servers (host commands)?
    max_message_bytes: int = 8 * 1024 * 1024  # an ACP frame larger than this is refused unparsed
    max_file_bytes: int = 16 * 1024 * 1024  # the largest file the fs channel reads or writes


@dataclass
class Config:
    """The whole config.toml, validated."""

    default_provider: str
    providers: dict[str, ProviderConfig]
    max_iterations: int = 10
    max_tokens_total: int | None = None  # a turn's token budget (input + output, every iteration)
    turn_timeout_secs: float | None = None  # a turn's time budget
    max_parallel_tools: int = 8
    max_parallel_subagents: int = 4  # delegate_task calls of one turn that run at once
    default_skills: list[str] = field(default_factory=list)
    work_dir: Path | None = None
    allow_shell: bool = False
    data_dir: Path | None = None
    theme_color: str | None = None
    mcp_servers: dict[str, McpServerConfig] = field(default_factory=dict)
    mcp_startup_timeout_secs: int = 10  # how long a turn waits for MCP servers that are still starting
    mcp_max_message_mib: int = 8  # a bigger message from an MCP server is refused
    # project .mcp.json servers allowed to read these provider-key variables ({server: [VAR, ...]})
    mcp_project_key_vars: dict[str, list[str]] = field(default_factory=dict)
    memory: MemoryConfig | None = None
    serve: ServeConfig = field(default_factory=ServeConfig)
    permissions: RuleSet = field(default_factory=RuleSet)  # [permissions] allow / deny
    compaction: CompactionConfig = field(default_factory=CompactionConfig)  # [compaction]
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)  # [checkpoints]
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    prices: dict[str, Price] = field(default_factory=dict)  # [prices."provider/model"]
    max_cost: float | None = None  # [budgets] max_cost: US dollars one turn may spend
    hooks: tuple[HookSpec, ...] = ()  # [[hooks]]
    path: Path | None = None  # where it was loaded from
    record: str | None = None  # run --record: write every provider exchange to this file
    replay: str | None = None  # run --replay: serve every provider exchange from this file, no network


# --- field readers -----------------------------------------------------------


_PROVIDER_KEYS = {
    "kind",
    "api_base",
    "default_model",
    "models",
    "env_var",
    "api_key",
    "timeout_secs",
    "max_tokens",
    "context_window",
    "thinking",
    "recording",
    "context_windows",
}


def parse_provider(name: str, d: dict) -> ProviderConfig:
    if not isinstance(d, dict):
        raise ConfigError(f"[providers.{name}] must be a table")
    section = f"providers.{name}"
    warn_unknown(d, _PROVIDER_KEYS, section)
    kind = provider_kind(get_str(d, "kind", section) or infer_kind(name), f"{section}.kind")
    replay = kind.name == REPLAY
    if replay and not get_str(d, "recording", section):
        raise ConfigError(f'[{section}] has kind = "replay" but no \'recording\'; set recording = "path/to/file.jsonl"')
    thinking = d.get("thinking", "adaptive" if kind.thinking else "off")
    if thinking not in ("adaptive", "off"):
        raise ConfigError(f'\'{section}.thinking\' must be "adaptive" or "off", got {thinking!r}')
    return ProviderConfig(
        name=name,
        api_base=get_str(d, "api_base", section, required=not replay) or (REPLAY_BASE if replay else ""),
        default_model=get_str(d, "default_model", section, required=not replay) or "",
        models=get_str_list(d, "models", section),
        kind=kind.name,
        env_var=get_str(d, "env_var", section),
        api_key=get_str(d, "api_key", section),
        timeout_secs=get_int(d, "timeout_secs", section, default=120, maximum=MAX_TIMEOUT_SECS) or 120,
        max_tokens=get_int(d, "max_tokens", section),
        context_window=get_int(d, "context_window", section),
        thinking=thinking == "adaptive",
        recording=get_str(d, "recording", section),
        context_windows=_get_windows(d, section),
    )


def _get_windows(d: dict, section: str) -> dict[str, int]:
    """``context_windows = { "model" = tokens }``: each model's window, when it differs from context_window."""
    table = d.get("context_windows", {})
    if not isinstance(table, dict):
        raise ConfigError(f"'{section}.context_windows' must be a table of model = tokens")
    for model, tokens in table.items():
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
            raise ConfigError(f"'{section}.context_windows.{model}' must be a positive integer, got {tokens!r}")
    return dict(table)


_MCP_KEYS = {"command", "args", "env", "url", "headers", "tool_timeout_secs", "transport", "sandbox"}


def _key_vars(value: object) -> dict[str, list[str]]:
    if not isinstance(value, dict) or not all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in value.values()
    ):
        raise ConfigError("'mcp_project_key_vars' must be a table of server name = [\"VAR\", ...]")
    return {str(k): list(v) for k, v in value.items()}


def parse_mcp_server(name: str, d: dict, section: str | None = None) -> McpServerConfig:
    """One server's table (or JSON object); ``section`` names it in messages (default ``mcp_servers.NAME``)."""
    section = section or f"mcp_servers.{name}"
    if not isinstance(d, dict):
        raise ConfigError(f"[{section}] must be a table")
    warn_unknown(d, _MCP_KEYS, section)
    if d.get("tool_timeout_secs") == 0:
        raise ConfigError(f"MCP server '{name}' has tool_timeout_secs = 0; it must be at least 1")
    server = McpServerConfig(
        name=name,
        command=get_str(d, "command", section),
        args=get_str_list(d, "args", section),
        env=get_str_map(d, "env", section),
        url=get_str(d, "url", section),
        headers=get_str_map(d, "headers", section),
        tool_timeout_secs=get_int(d, "tool_timeout_secs", section, default=600, maximum=MAX_TIMEOUT_SECS) or 600,
        sandbox=sandbox_mode(get_str(d, "sandbox", section) or "off", f"{section}.sandbox"),
    )
    transport = get_str(d, "transport", section)
    if transport not in (None, "http", "sse"):
        raise ConfigError(
            f"MCP server '{name}' has transport '{transport}'; use \"http\" (streamable HTTP) or "
            '"sse" (the older HTTP+SSE), or leave it out'
        )
    server.sse = transport == "sse"
    if not server.command and not server.url:
        raise ConfigError(f"MCP server '{name}' must have either 'command' (stdio) or 'url' (HTTP)")
    if server.url:
        check_mcp_url(name, server.url, bool(server.headers))
    for hname, hvalue in server.headers.items():
        if not hname or any(c in hname for c in " :\r\n") or any(c in hvalue for c in "\r\n"):
            raise ConfigError(f"MCP server '{name}' has an invalid header '{hname}'")
    return server


def check_mcp_url(name: str, url: str, has_headers: bool) -> None:
    """http(s) only; headers (credentials) never travel over plain http except to a loopback address."""
    from urllib.parse import urlsplit

    if not (url.startswith(("http://", "https://"))):
        raise ConfigError(f"MCP server '{name}' url '{scrub_url(url)}' must start with http:// or https://")
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        raise ConfigError(f"MCP server '{name}' has an invalid url") from None
    if url.startswith("http://") and has_headers and not is_loopback(host):
        raise ConfigError(
            f"MCP server '{name}' uses http:// with headers; credentials must not be sent over an "
            "unencrypted connection (use https://, or a loopback address)"
        )


def parse_memory(d: dict) -> MemoryConfig:
    warn_unknown(d, {"embedding_provider", "embedding_model", "db_path", "top_k"}, "memory")
    provider = get_str(d, "embedding_provider", "memory")
    model = get_str(d, "embedding_model", "memory")
    if model and model.strip() and not provider:
        raise ConfigError("[memory] embedding_model is set but embedding_provider is not")
    if provider and not (model and model.strip()):
        raise ConfigError("[memory] embedding_model is required when embedding_provider is set")
    db_path = get_str(d, "db_path", "memory")
    if db_path is not None and not Path(db_path).is_absolute():
        raise ConfigError(f"[memory] db_path '{db_path}' must be an absolute path")
    top_k = get_int(d, "top_k", "memory", default=5, minimum=0) or 5
    return MemoryConfig(provider, model, Path(db_path) if db_path else None, top_k)


def parse_serve(d: dict) -> ServeConfig:
    from urllib.parse import urlsplit

    warn_unknown(
        d,
        {
            "host",
            "port",
            "token_env",
            "cors_origins",
            "allow_client_mcp_commands",
            "max_message_bytes",
            "max_file_bytes",
        },
        "serve",
    )
    port = get_int(d, "port", "serve", minimum=0)
    if port is not None and port > 65535:
        raise ConfigError(f"'serve.port' must be at most 65535, got {port}")
    token_env = get_str(d, "token_env", "serve") or "OPENHEIM_SERVE_TOKEN"
    origins = get_str_list(d, "cors_origins", "serve")
    for origin in origins:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/") or parts.query:
            raise ConfigError(
                f"'serve.cors_origins' entry '{origin}' must be an origin like https://example.com "
                "(scheme, host and optional port; no path, no wildcard)"
            )
    sizes = {
        key: get_int(d, key, "serve", minimum=1024, maximum=1 << 30) for key in ("max_message_bytes", "max_file_bytes")
    }
    allow_commands = get_bool(d, "allow_client_mcp_commands", "serve")
    return ServeConfig(
        get_str(d, "host", "serve"),
        port,
        token_env,
        [o.rstrip("/") for o in origins],
        allow_commands,
        **{k: v for k, v in sizes.items() if v is not None},
    )


def sandbox_mode(value: str, where: str) -> str:
    if value not in SANDBOX_MODES:
        raise ConfigError(f"'{where}' must be one of {', '.join(SANDBOX_MODES)}, got {value!r}")
    return value


SANDBOX_LIMITS = ("address_space_mb", "file_size_mb", "processes", "cpu_secs")


def parse_sandbox(d: dict) -> SandboxConfig:
    keys = {"mode", "network", "writable_roots", "required", "keep_env", "allow_unix_sockets", "limits"}
    warn_unknown(d, keys, "sandbox")
    roots = get_str_list(d, "writable_roots", "sandbox")
    for root in roots:
        if not Path(root).expanduser().is_absolute():
            raise ConfigError(f"'sandbox.writable_roots' entry '{root}' must be an absolute directory")
    return SandboxConfig(
        sandbox_mode(get_str(d, "mode", "sandbox") or "workspace-write", "sandbox.mode"),
        get_bool(d, "network", "sandbox"),
        [str(Path(r).expanduser()) for r in roots],
        get_bool(d, "required", "sandbox"),
        get_str_list(d, "keep_env", "sandbox"),
        _unix_sockets(d),
        _sandbox_limits(get_table(d, "limits")),
    )


def _unix_sockets(d: dict) -> list[str] | bool:
    """``allow_unix_sockets``: true (every named socket) or a list of absolute socket paths."""
    if isinstance(d.get("allow_unix_sockets"), bool):
        return d["allow_unix_sockets"]
    paths = get_str_list(d, "allow_unix_sockets", "sandbox")
    for path in paths:
        if not Path(path).expanduser().is_absolute():
            raise ConfigError(f"'sandbox.allow_unix_sockets' entry '{path}' must be an absolute path (or use true)")
    return [str(Path(p).expanduser()) for p in paths]


def _sandbox_limits(d: dict) -> dict[str, int]:
    warn_unknown(d, set(SANDBOX_LIMITS), "sandbox.limits")
    return {k: v for k in SANDBOX_LIMITS if (v := get_int(d, k, "sandbox.limits", minimum=0)) is not None}


def parse_permissions(d: dict, source: str) -> RuleSet:
    """``[permissions]`` allow / deny lists of rules (``source`` names the file in each rule)."""
    warn_unknown(d, {"allow", "deny"}, "permissions")
    try:
        return parse_rules(get_str_list(d, "allow", "permissions"), get_str_list(d, "deny", "permissions"), source)
    except RuleError as e:
        raise ConfigError(str(e)) from None


def parse_budgets(d: dict) -> float | None:
    """``[budgets]``: ``max_cost``, the US dollars one turn may spend (the chat, serve and ACP; run has --max-cost)."""
    warn_unknown(d, {"max_cost"}, "budgets")
    value = d.get("max_cost")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"'budgets.max_cost' must be a positive number of US dollars, got {value!r}")
    return float(value)


_TOP_KEYS = {
    "default_provider",
    "max_iterations",
    "default_skills",
    "work_dir",
    "allow_shell",
    "data_dir",
    "tui",
    "providers",
    "mcp_servers",
    "mcp_startup_timeout_secs",
    "mcp_max_message_mib",
    "mcp_project_key_vars",
    "memory",
    "theme_color",
    "max_parallel_tools",
    "max_parallel_subagents",
    "serve",
    "max_tokens_total",
    "turn_timeout_secs",
    "permissions",
    "sandbox",
    "prices",
    "budgets",
    "hooks",
    "compaction",
    "checkpoints",
}


def parse_config(d: dict, path: Path | None = None) -> Config:
    """Build a Config from the parsed TOML dict; raises ConfigError naming the offending key."""
    warn_unknown(d, _TOP_KEYS, "")
    providers = {name: parse_provider(name, p) for name, p in sorted(get_table(d, "providers").items())}
    default_provider = get_str(d, "default_provider", required=True) or ""
    tui = get_table(d, "tui")
    theme = get_str(tui, "theme_color", "tui") or get_str(d, "theme_color")
    work_dir = get_str(d, "work_dir")
    data_dir = get_str(d, "data_dir")
    memory = d.get("memory")
    if memory is not None and not isinstance(memory, dict):
        raise ConfigError("'memory' must be a table ([memory])")
    return Config(
        default_provider=default_provider,
        providers=providers,
        max_iterations=get_int(d, "max_iterations", default=10) or 10,
        max_tokens_total=get_int(d, "max_tokens_total"),
        turn_timeout_secs=get_seconds(d, "turn_timeout_secs"),
        max_parallel_tools=get_int(d, "max_parallel_tools", default=8) or 8,
        max_parallel_subagents=get_int(d, "max_parallel_subagents", default=4) or 4,
        default_skills=get_str_list(d, "default_skills"),
        work_dir=Path(work_dir).expanduser() if work_dir else None,
        allow_shell=get_bool(d, "allow_shell"),
        data_dir=Path(data_dir).expanduser() if data_dir else None,
        theme_color=theme,
        mcp_servers={n: parse_mcp_server(n, s) for n, s in sorted(get_table(d, "mcp_servers").items())},
        mcp_startup_timeout_secs=present_int(get_int(d, "mcp_startup_timeout_secs", default=10, minimum=0)),
        mcp_max_message_mib=present_int(get_int(d, "mcp_max_message_mib", default=8, minimum=1)),
        mcp_project_key_vars=_key_vars(d.get("mcp_project_key_vars", {})),
        memory=parse_memory(memory) if isinstance(memory, dict) else None,
        serve=parse_serve(get_table(d, "serve")),
        permissions=parse_permissions(get_table(d, "permissions"), str(path) if path else "config"),
        compaction=parse_compaction(get_table(d, "compaction")),
        checkpoints=parse_checkpoints(get_table(d, "checkpoints")),
        sandbox=parse_sandbox(get_table(d, "sandbox")),
        prices=parse_prices(get_table(d, "prices")),
        max_cost=parse_budgets(get_table(d, "budgets")),
        hooks=parse_hooks(d.get("hooks"), str(path) if path else "config"),
        path=path,
    )
