"""`openheim doctor`: what this installation sees (config, providers, vectors, MCP, TLS, terminal, locale).

Every check is ok, warn or fail. Only a fail makes the exit code 1; it means `openheim run` with the
default provider cannot work here: the config is missing, unreadable or invalid, the data directory is
unusable, the default provider has no usable key or api_base, its endpoint cannot be reached or refuses the
key (each configured endpoint is tried at once, within 3 s; `--offline` skips that), or the CA bundle
requests would use is missing or holds no certificates. Optional things (no MCP servers, vectors off,
another provider without a key, a failed MCP server, a non-UTF-8 locale) are warnings. Key values are
never shown: only where a key comes from.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from openheim.client import OpenheimClient
from openheim.commands.doctor_host import check_ca_bundle, check_locale, check_terminal, check_vectors, check_version
from openheim.commands.doctor_reach import Reach, probe_all
from openheim.commands.doctor_report import Check, as_json, as_lines, exit_code
from openheim.config.load import config_path, data_dir, default_home, read_config
from openheim.config.private_data import problem as privacy_problem
from openheim.config.providers import COMPATIBLE, KINDS
from openheim.config.resolve import resolve_api_key, validate_provider
from openheim.config.schema import SandboxConfig
from openheim.config.secrecy import redact, shown_url
from openheim.config.unknown_keys import UnknownKey, tell
from openheim.core.control_chars import visible
from openheim.errors import ConfigError
from openheim.sandbox.policy import Sandbox
from openheim.sandbox.support import probe, summary

if TYPE_CHECKING:
    from openheim.config.schema import Config, ProviderConfig


def run_checks(
    config_path: str | None, mcp_config: str | None, mcp_timeout: float, offline: bool = False
) -> list[Check]:
    """Every check, in the order the human output shows them."""

    checks = [check_version(), check_home()]
    config = None
    try:
        config, unknown = read_config(config_path)
        tell(unknown, quietly=True)  # shown here, once, not again on stderr when a check loads the config
        checks.append(
            _unknown_keys_check(config_path, unknown) if unknown else _config_check(config_path, "ok", "loaded")
        )
    except ConfigError as e:
        checks.append(_config_check(config_path, "fail", " ".join(e.message.split())))
    checks.append(check_data_dir(config))
    checks += check_providers(config, offline)
    checks += [
        check_sandbox(config),
        check_vectors(),
        check_mcp(config, config_path, mcp_config, mcp_timeout),
        check_ca_bundle(),
        check_terminal(),
        check_locale(),
    ]
    return checks


def check_home() -> Check:
    env = os.environ.get("OPENHEIM_HOME", "").strip()
    try:
        home = default_home()
    except ConfigError as e:  # no HOME and no OPENHEIM_HOME
        return Check("home", "home", "fail", " ".join(str(e).split()), {"path": None, "from": None})
    source = "OPENHEIM_HOME" if env else "~/.openheim"
    return Check("home", "home", "ok", f"{home} (from {source})", {"path": str(home), "from": source})


def _config_check(explicit: str | None, status: str, detail: str) -> Check:
    try:
        path: Path | None = config_path(explicit)
    except ConfigError:
        path = None
    source = "--config" if explicit else "OPENHEIM_CONFIG" if os.environ.get("OPENHEIM_CONFIG", "").strip() else "home"
    shown = f"{path}: {detail}" if status == "ok" else detail
    return Check(
        "config",
        "config",
        status,
        shown,
        {
            "path": str(path) if path else None,
            "from": source,
            "loaded": status == "ok",
            "exists": bool(path and path.is_file()),
            "error": None if status == "ok" else detail,
        },
    )


def _unknown_keys_check(explicit: str | None, unknown: list[UnknownKey]) -> Check:
    """Keys openheim does not know are ignored by a run, so the user's setting silently does nothing: a problem."""
    listed = ", ".join(
        f"line {k.line or '?'} '{k.dotted}'" + (f" (did you mean '{k.suggestion}'?)" if k.suggestion else "")
        for k in unknown
    )
    check = _config_check(explicit, "fail", f"unknown keys, ignored: {listed}; fix or remove them")
    check.detail = f"{check.facts['path']}: {check.detail}"
    check.facts["loaded"] = True
    check.facts["unknown_keys"] = [{"key": k.dotted, "line": k.line, "suggestion": k.suggestion} for k in unknown]
    return check


def check_data_dir(config: Config | None) -> Check:

    try:
        path = data_dir(config)
    except ConfigError as e:
        return Check("data_dir", "data dir", "fail", " ".join(str(e).split()), {"path": None})
    facts = {"path": str(path), "exists": path.is_dir()}
    if path.is_dir():
        writable = os.access(path, os.W_OK | os.X_OK)
        facts["writable"] = writable
        if not writable:
            return Check(
                "data_dir",
                "data dir",
                "fail",
                f"{path} is not writable; fix its permissions or point data_dir (or OPENHEIM_HOME) elsewhere",
                facts,
            )
        loose = privacy_problem(path)
        facts["private"] = loose is None
        if loose is not None:
            return Check("data_dir", "data dir", "warn", loose, facts)
        return Check("data_dir", "data dir", "ok", f"{path} (private: 0700)", facts)
    parent = next((p for p in path.parents if p.exists()), None)
    facts["writable"] = bool(parent and os.access(parent, os.W_OK | os.X_OK))
    if not facts["writable"]:
        return Check("data_dir", "data dir", "fail", f"{path} does not exist and cannot be created", facts)
    return Check("data_dir", "data dir", "ok", f"{path} (created on first use)", facts)


def check_providers(config: Config | None, offline: bool = False) -> list[Check]:
    if config is None:
        return []
    if not config.providers:
        return [Check("providers", "providers", "fail", "no [providers] configured; run `openheim init`", {})]
    checks = [_provider_check(p, p.name == config.default_provider) for _, p in sorted(config.providers.items())]
    if offline:
        return checks
    ready = [(config.providers[c.facts["name"]], c) for c in checks if c.status == "ok"]
    reach = probe_all([(p, resolve_api_key(p) or None) for p, _ in ready])
    for p, check in ready:
        with_reach(check, reach.get(p.name), p.name == config.default_provider)
    return checks


def with_reach(check: Check, reach: Reach | None, is_default: bool) -> None:
    """Fold a provider's reachability into its check: an endpoint that cannot be reached is a problem."""
    if reach is None:
        return
    check.facts["reachable"] = reach.ok
    if reach.ok:
        check.detail += f"; {reach.detail}"
    else:
        check.facts["error"] = reach.detail
        check.status = "fail" if is_default else "warn"
        check.detail = f"{check.detail.split('; ')[0]}; {reach.detail}"


def key_source(p: ProviderConfig) -> tuple[str | None, str]:
    """Where the provider's key would come from (never the key): ``env:VAR``, ``config`` or None, and why."""
    if p.env_var and os.environ.get(p.env_var, "").strip():
        return f"env:{p.env_var}", f"key from ${p.env_var}"
    if p.api_key:
        return "config", "key from config.toml"
    if p.env_var:
        return None, f"no key: set ${p.env_var}"
    return None, "no key"


def _provider_check(p: ProviderConfig, is_default: bool) -> Check:

    source, said = key_source(p)
    facts = {
        "name": p.name,
        "default": is_default,
        "kind": p.kind,
        "api_base": shown_url(p.api_base),
        "default_model": p.default_model,
        "key_present": source is not None,
        "key_from": source,
        "key_env": p.env_var,
    }
    label = f"provider {p.name}" + (" (default)" if is_default else "")
    detail = f"{p.kind} {facts['api_base']} model {p.default_model}"
    problem = None
    try:
        validate_provider(p, resolve_api_key(p))
    except ConfigError as e:
        problem = " ".join(e.message.split())
    if problem is None and source is None and p.kind != COMPATIBLE:  # a keyless local server is normal
        var = KINDS[p.kind].key_env
        problem = f"provider '{p.name}' has no API key; set env_var = \"{var}\" and ${var}, or api_key"
    if problem is None:
        return Check(
            "providers", label, "ok", f"{detail}; {said}" + (" (a keyless endpoint)" if source is None else ""), facts
        )
    facts["error"] = problem
    if not is_default and source is None and p.env_var and "needs an API key" in problem:
        # a provider the user has not set up (init's template names three): not a problem until it is used
        return Check("providers", label, "info", f"{detail}; not set up: set ${p.env_var} to use it", facts)
    return Check("providers", label, "fail" if is_default else "warn", f"{detail}; {problem}", facts)


def check_mcp(config: Config | None, config_path: str | None, mcp_config: str | None, timeout: float) -> Check:
    """Start every MCP server openheim would use here and wait up to ``timeout`` seconds for each."""
    if config is None and not mcp_config:
        return Check("mcp", "mcp", "info", "not checked: the config did not load", {"servers": []})
    box: dict[str, Any] = {}

    def probe() -> None:
        import logging

        logging.getLogger("openheim.mcp").setLevel(logging.CRITICAL)  # the check says what failed, once
        try:
            client = OpenheimClient.builder().config_path(config_path).mcp_config(mcp_config).check_model(False).build()
            with client:
                box["servers"] = [s.to_dict() for s in client.mcp_servers(wait=timeout, cwd=os.getcwd())]
        except Exception as e:
            box["error"] = " ".join(str(e).split()) or type(e).__name__

    worker = threading.Thread(target=probe, name="openheim-doctor-mcp", daemon=True)
    worker.start()
    worker.join(timeout + 10)  # servers get `timeout` each in parallel; closing them is bounded too
    if worker.is_alive():
        return Check(
            "mcp",
            "mcp",
            "warn",
            f"the servers did not settle within {timeout + 10:g}s",
            {"servers": [], "error": "timeout"},
        )
    if "error" in box:
        return Check("mcp", "mcp", "warn", f"not checked: {box['error']}", {"servers": [], "error": box["error"]})
    servers = box["servers"]
    if not servers:
        return Check("mcp", "mcp", "ok", "no servers configured", {"servers": []})
    bad = [s for s in servers if not s["connected"]]
    parts = [
        f"{s['name']} {s['state']}"
        + (f" ({s['tool_count']} tools)" if s["connected"] else f" ({s.get('error', '')})".replace(" ()", ""))
        for s in servers
    ]
    return Check("mcp", "mcp", "warn" if bad else "ok", "; ".join(parts), {"servers": servers})


# the helper's report keys, one per layer (docs/security.md's table names the same)
LAYERS = (
    "filesystem",
    "protected",
    "data_hidden",
    "capabilities",
    "private_ptys",
    "tcp",
    "udp",
    "scoped",
    "seccomp",
)


def check_sandbox(config: Config | None) -> Check:
    """What the kernel enforces of [sandbox] here, as the sandbox helper itself reports it."""

    hidden = (str(data_dir(config)), str(config.path)) if config is not None and config.path else ()
    sandbox = Sandbox.from_config(config.sandbox if config is not None else SandboxConfig(), hidden)
    root = os.path.realpath(config.work_dir if config is not None and config.work_dir else os.getcwd())
    report = probe(sandbox, root)
    enforced = {k: bool(report.get(k)) for k in LAYERS}
    enforced["unix_sockets"] = report.get("unix") in ("closed", "paths")
    facts = {
        "mode": sandbox.mode,
        "network": sandbox.network,
        "required": sandbox.required,
        "writable_roots": list(sandbox.writable_roots),
        "landlock_abi": report.get("landlock_abi", 0),
        "enforced": enforced,
        "not_enforced": list(report.get("not_enforced", [])),
        "limits_not_enforced": list(report.get("limits_not_enforced", [])),
        "unix_sockets": report.get("unix"),
    }
    if "error" in report:
        facts["not_enforced"].append(report["error"])
    for entry, link in sandbox.linked_roots(root):
        facts["not_enforced"].append(f"writable_roots entry {entry} left out: it passes through the symlink {link}")
    gaps = bool(facts["not_enforced"])
    status = "fail" if gaps and sandbox.required else "warn" if gaps or not sandbox.active else "ok"
    return Check("sandbox", "sandbox", status, summary(report), facts)


@click.command(
    "doctor",
    epilog="\b\nExit codes:\n  0    all is well (warnings allowed)\n"
    "  1    a check failed: config, data dir, default provider's key, api_base or endpoint, CA bundle",
)
@click.option("--json", "json_output", is_flag=True, help="Print one JSON object instead of lines.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds to wait for MCP servers that are still starting.",
)
@click.option("--offline", is_flag=True, help="Do not try the providers' endpoints (they are tried within 3 s).")
@click.pass_context
def doctor_command(ctx: click.Context, json_output: bool, timeout: float, offline: bool) -> None:
    """Check this installation: config, providers and keys, vectors, MCP servers, CA bundle, terminal, locale."""
    import json

    checks = run_checks(ctx.obj.get("config_path"), ctx.obj.get("mcp_config"), timeout, offline)
    if json_output:
        click.echo(redact(json.dumps(as_json(checks), ensure_ascii=False, indent=2)))
    else:
        for line in as_lines(checks):
            click.echo(visible(redact(line)))
    sys.exit(exit_code(checks))
