"""`openheim doctor`'s checks of the machine it runs on: version, vectors, the CA bundle, terminal and locale."""

from __future__ import annotations

import os
import ssl
import sys
from pathlib import Path
from types import ModuleType
from typing import IO, Any

from openheim.commands.doctor_report import Check
from openheim.version import __version__


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


def check_vectors() -> Check:
    """Whether sqlite-vec loads, through which SQLite module, and which SQLite library that is."""
    from openheim.memory.sqlite import select_driver

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
    from openheim.memory.sqlite import load_vec

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


def check_ca_bundle() -> Check:
    """The CA bundle requests would verify HTTPS with, and whether ssl can load certificates from it."""
    source, path = ca_bundle_path()
    facts: dict[str, Any] = {"path": path, "from": source, "exists": os.path.exists(path)}
    facts.update(certificates=0, loadable=False)
    if not facts["exists"]:
        why = "does not exist; HTTPS cannot be verified: point REQUESTS_CA_BUNDLE at a PEM file"
        return Check("ca_bundle", "CA bundle", "fail", f"{path} (from {source}) {why}", facts)
    facts.update(load_certificates(path))
    if not facts["loadable"]:
        error = f": {facts['error']}" if "error" in facts else ""
        why = f"holds no loadable certificates{error}"
        return Check("ca_bundle", "CA bundle", "fail", f"{path} (from {source}) {why}", facts)
    return Check("ca_bundle", "CA bundle", "ok", f"{path} ({facts['certificates']} certificates, from {source})", facts)


def ca_bundle_path() -> tuple[str, str]:
    """Where requests finds its CA bundle, and what named it: its two variables first, else certifi's."""
    for var in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        if os.environ.get(var):
            return var, os.environ[var]
    from requests.utils import DEFAULT_CA_BUNDLE_PATH

    return "certifi", DEFAULT_CA_BUNDLE_PATH


def load_certificates(path: str) -> dict[str, Any]:
    """How many CA certificates ssl loads from a bundle file (or a hashed directory), and any error."""
    directory = os.path.isdir(path)
    try:
        ctx = ssl.create_default_context(cafile=None if directory else path, capath=path if directory else None)
    except (ssl.SSLError, OSError, ValueError) as e:
        return {"error": str(e)}
    count = ctx.cert_store_stats()["x509_ca"]
    return {"certificates": count, "loadable": directory or count > 0}


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
