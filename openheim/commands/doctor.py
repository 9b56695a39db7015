"""`openheim doctor`: what this installation sees (config, providers, vectors, MCP, TLS, terminal, locale).

Every check is ok, warn or fail. Only a fail makes the exit code 1; it means `openheim run` with the
default provider cannot work here: the config is missing, unreadable or invalid, the data directory is
unusable, the default provider has no usable key or api_base, or the CA bundle requests would use is
missing or holds no certificates. Optional things (no MCP servers, vectors off, another provider without
a key, a failed MCP server, a non-UTF-8 locale) are warnings. Key values are never shown: only where a
key comes from.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from openheim.client import OpenheimClient
from openheim.config.load import config_path, data_dir, default_home, load_config
from openheim.config.providers import COMPATIBLE, KINDS
from openheim.config.resolve import resolve_api_key, validate_provider
from openheim.config.schema import SandboxConfig
from openheim.config.secrecy import redact, shown_url
from openheim.errors import ConfigError
from openheim.memory.sqlite import load_vec, select_driver
from openheim.sandbox.policy import Sandbox
from openheim.sandbox.support import probe, summary
from openheim.version import __version__

if TYPE_CHECKING:
    from types import ModuleType

    from openheim.config.schema import Config, ProviderConfig

MARKS = {"ok": "ok", "warn": "warn", "fail": "FAIL", "info": "--"}


@dataclass
class Check:
    key: str  # the JSON member ("providers" checks are collected in a list)
    label: str  # the human line's name
    status: str  # ok | warn | fail | info
    detail: str
    facts: dict[str, Any] = field(default_factory=dict)


def run_checks(config_path: str | None, mcp_config: str | None, mcp_timeout: float) -> list[Check]:
    """Every check, in the order the human output shows them."""
    checks = [check_version(), check_home()]
    config = None
    try:
        config = load_config(config_path)
        checks.append(_config_check(config_path, "ok", "loaded"))
    except ConfigError as e:
        checks.append(_config_check(config_path, "fail", " ".join(e.message.split())))
    checks.append(check_data_dir(config))
    checks += check_providers(config)
    checks += [
        check_sandbox(config),
        check_vectors(),
        check_mcp(config, config_path, mcp_config, mcp_timeout),
        check_ca_bundle(),
        check_terminal(),
        check_locale(),
    ]
    return checks


def check_version() -> Check:
    frozen = bool(getattr(sys, "frozen", False))
    python = ".".join(map(str, sys.version_info[:3]))
    how = "frozen binary" if frozen else "Python package"
    return Check(
        "version",
        "version",
        "ok",
        f"openheim {__version__} ({how}, Python {python})",
        {"openheim": __version__, "python": python, "frozen": frozen, "executable": sys.executable},
    )


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
        return Check("data_dir", "data dir", "ok", str(path), facts)
    parent = next((p for p in path.parents if p.exists()), None)
    facts["writable"] = bool(parent and os.access(parent, os.W_OK | os.X_OK))
    if not facts["writable"]:
        return Check("data_dir", "data dir", "fail", f"{path} does not exist and cannot be created", facts)
    return Check("data_dir", "data dir", "ok", f"{path} (created on first use)", facts)


def check_providers(config: Config | None) -> list[Check]:
    if config is None:
        return []
    if not config.providers:
        return [Check("providers", "providers", "fail", "no [providers] configured; run `openheim init`", {})]
    return [_provider_check(p, p.name == config.default_provider) for _, p in sorted(config.providers.items())]


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


def check_vectors() -> Check:
    """Whether sqlite-vec loads, through which SQLite module, and which SQLite library that is."""
    driver = select_driver()
    facts: dict[str, Any] = {
        "available": driver.vectors,
        "driver": driver.name,
        "sqlite_version": getattr(driver.module, "sqlite_version", None),
        "library": _sqlite_library(driver.module),
        "vec_version": None,
    }
    if not driver.vectors:
        facts["reason"] = driver.reason
        return Check("vectors", "vectors", "warn", f"off, keyword search only: {driver.reason}", facts)

    conn = driver.module.connect(":memory:")
    try:
        load_vec(conn)
        facts["vec_version"] = conn.execute("select vec_version()").fetchone()[0]
    except Exception as e:
        facts["available"], facts["reason"] = False, str(e) or type(e).__name__
        return Check("vectors", "vectors", "warn", f"off, keyword search only: {facts['reason']}", facts)
    finally:
        conn.close()
    return Check(
        "vectors",
        "vectors",
        "ok",
        f"sqlite-vec {facts['vec_version']} via {driver.name} (SQLite {facts['sqlite_version']}, {facts['library']})",
        facts,
    )


def _sqlite_library(module: ModuleType) -> str | None:
    """The shared object that holds SQLite for ``module``: libsqlite3 when it is mapped, else the C extension."""
    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        maps = ""
    libs = sorted({line.split(None, 5)[-1] for line in maps.splitlines() if "libsqlite3" in line})
    if module.__name__.startswith("pysqlite3"):
        import pysqlite3._sqlite3 as ext  # statically linked: the extension is the library

        return ext.__file__
    if libs:
        return libs[0]
    import _sqlite3

    return _sqlite3.__file__


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


def check_ca_bundle() -> Check:
    """The CA bundle requests would verify HTTPS with, and whether ssl can load certificates from it."""
    import ssl

    source, path = "certifi", None
    for var in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # requests honours these before its default
        if os.environ.get(var):
            source, path = var, os.environ[var]
            break
    if path is None:
        from requests.utils import DEFAULT_CA_BUNDLE_PATH

        path = DEFAULT_CA_BUNDLE_PATH
    facts: dict[str, Any] = {
        "path": path,
        "from": source,
        "exists": os.path.exists(path),
        "certificates": 0,
        "loadable": False,
    }
    if not facts["exists"]:
        return Check(
            "ca_bundle",
            "CA bundle",
            "fail",
            f"{path} (from {source}) does not exist; HTTPS cannot be verified: point REQUESTS_CA_BUNDLE at a PEM file",
            facts,
        )
    try:
        ctx = ssl.create_default_context(
            cafile=None if os.path.isdir(path) else path, capath=path if os.path.isdir(path) else None
        )
        facts["certificates"] = ctx.cert_store_stats()["x509_ca"]
        facts["loadable"] = os.path.isdir(path) or facts["certificates"] > 0
    except (ssl.SSLError, OSError, ValueError) as e:
        facts["error"] = str(e)
    if not facts["loadable"]:
        return Check(
            "ca_bundle",
            "CA bundle",
            "fail",
            f"{path} (from {source}) holds no loadable certificates{': ' + facts['error'] if 'error' in facts else ''}",
            facts,
        )
    return Check("ca_bundle", "CA bundle", "ok", f"{path} ({facts['certificates']} certificates, from {source})", facts)


def check_terminal() -> Check:
    streams = {name: _isatty(getattr(sys, name)) for name in ("stdin", "stdout", "stderr")}
    size = None
    for stream in (sys.stdout, sys.stderr, sys.stdin):
        try:
            cols, rows = os.get_terminal_size(stream.fileno())
            size = {"columns": cols, "rows": rows}
            break
        except (OSError, ValueError, AttributeError):
            continue
    term = os.environ.get("TERM") or None
    facts = {**{f"{k}_tty": v for k, v in streams.items()}, "term": term, "size": size}
    ttys = ",".join(k for k, v in streams.items() if v) or "none"
    shown = f"TERM={term or '(unset)'}, tty: {ttys}" + (f", {size['columns']}x{size['rows']}" if size else "")
    if streams["stdin"] and streams["stdout"] and term in (None, "dumb"):
        return Check("terminal", "terminal", "warn", f"{shown}: the chat needs TERM set to a real terminal", facts)
    return Check("terminal", "terminal", "ok", shown, facts)


def _isatty(stream: IO[str] | None) -> bool:
    try:
        return bool(stream and stream.isatty())
    except (ValueError, OSError):
        return False


def check_locale() -> Check:
    import codecs
    import locale

    preferred = locale.getpreferredencoding(False)
    stdout = getattr(sys.stdout, "encoding", None)
    fs_encoding = sys.getfilesystemencoding()
    facts: dict[str, Any] = {
        "preferred_encoding": preferred,
        "stdout_encoding": stdout,
        "filesystem_encoding": fs_encoding,
        "utf8_mode": bool(sys.flags.utf8_mode),
        **{k.lower(): os.environ.get(k) for k in ("LANG", "LC_ALL", "LC_CTYPE")},
    }
    encodings = {codecs.lookup(e).name for e in (preferred, stdout or preferred, fs_encoding)}
    facts["utf8"] = encodings == {"utf-8"}
    shown = f"{preferred} (stdout {stdout}, UTF-8 mode {'on' if facts['utf8_mode'] else 'off'})"
    if not facts["utf8"]:
        return Check("locale", "locale", "warn", f"{shown}: non-ASCII text may be mangled; set LANG=C.UTF-8", facts)
    return Check("locale", "locale", "ok", shown, facts)


def check_sandbox(config: Config | None) -> Check:
    """What the kernel enforces of [sandbox] here, as the sandbox helper itself reports it."""
    sandbox = Sandbox.from_config(config.sandbox if config is not None else SandboxConfig())
    root = os.path.realpath(config.work_dir if config is not None and config.work_dir else os.getcwd())
    report = probe(sandbox, root)
    enforced = {k: bool(report.get(k)) for k in ("filesystem", "protected", "tcp", "udp", "scoped", "seccomp")}
    facts = {
        "mode": sandbox.mode,
        "network": sandbox.network,
        "required": sandbox.required,
        "writable_roots": list(sandbox.writable_roots),
        "landlock_abi": report.get("landlock_abi", 0),
        "enforced": enforced,
        "not_enforced": list(report.get("not_enforced", [])),
    }
    if "error" in report:
        facts["not_enforced"].append(report["error"])
    gaps = bool(facts["not_enforced"])
    status = "fail" if gaps and sandbox.required else "warn" if gaps or not sandbox.active else "ok"
    return Check("sandbox", "sandbox", status, summary(report), facts)


def exit_code(checks: list[Check]) -> int:
    return 1 if any(c.status == "fail" for c in checks) else 0


def as_json(checks: list[Check]) -> dict[str, Any]:
    """One object: ``ok``, ``exit_code``, then one member per check (``providers`` is a list)."""
    out: dict[str, Any] = {"ok": exit_code(checks) == 0, "exit_code": exit_code(checks), "providers": []}
    for c in checks:
        entry = {"status": c.status, "detail": c.detail, **c.facts}
        if c.key == "providers":
            out["providers"].append(entry)
        else:
            out[c.key] = entry
    return out


def as_lines(checks: list[Check]) -> list[str]:
    """Aligned human lines: mark, name, detail; then a summary."""
    width = max(len(c.label) for c in checks)
    lines = [f"{MARKS[c.status]:<4}  {c.label:<{width}}  {c.detail}" for c in checks]
    fails = [c.label for c in checks if c.status == "fail"]
    warns = sum(c.status == "warn" for c in checks)
    if fails:
        lines.append(f"not ready: {', '.join(fails)} failed" + (f"; {warns} warning(s)" if warns else ""))
    else:
        lines.append("ready" + (f" ({warns} warning(s))" if warns else ""))
    return lines


@click.command(
    "doctor",
    epilog="\b\nExit codes:\n  0    all is well (warnings allowed)\n"
    "  1    a check failed: config, data dir, default provider's key or api_base, CA bundle",
)
@click.option("--json", "json_output", is_flag=True, help="Print one JSON object instead of lines.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds to wait for MCP servers that are still starting.",
)
@click.pass_context
def doctor_command(ctx: click.Context, json_output: bool, timeout: float) -> None:
    """Check this installation: config, providers and keys, vectors, MCP servers, CA bundle, terminal, locale."""
    import json

    checks = run_checks(ctx.obj.get("config_path"), ctx.obj.get("mcp_config"), timeout)
    if json_output:
        click.echo(redact(json.dumps(as_json(checks), ensure_ascii=False, indent=2)))
    else:
        for line in as_lines(checks):
            click.echo(redact(line))
    sys.exit(exit_code(checks))
