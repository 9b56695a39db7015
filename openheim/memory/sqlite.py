"""SQLite driver selection: a build that can load sqlite-vec when one exists, else FTS5 alone."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from openheim.errors import DatabaseError

log = logging.getLogger(__name__)

PYSQLITE3_REQUIREMENT = (
    'pysqlite3-binary; sys_platform == "linux" and (platform_machine == "x86_64" or platform_machine == "aarch64")'
)

_NO_LOADER = (
    "this Python's sqlite3 module cannot load extensions and pysqlite3 is not installed; "
    "install pysqlite3-binary (pip install pysqlite3-binary) or use a Python built with "
    "--enable-loadable-sqlite-extensions"
)
_NO_VEC = "the sqlite-vec package is not installed; install it with: pip install sqlite-vec"


@dataclass(frozen=True)
class Driver:
    """The DB-API module to use and whether sqlite-vec loads into its connections."""

    module: ModuleType
    name: str
    vectors: bool
    reason: str = ""  # why vectors are off; empty when they are on


_lock = threading.Lock()
_driver: Driver | None = None
_noticed = False


def select_driver() -> Driver:
    """Probe once per process: stdlib sqlite3 if it loads sqlite-vec, else pysqlite3, else FTS5 only."""
    global _driver
    with _lock:
        if _driver is None:
            _driver = _probe()
        return _driver


def _probe() -> Driver:
    import sqlite3

    try:
        import sqlite_vec  # noqa: F401
    except ImportError:
        return Driver(sqlite3, "sqlite3", False, _NO_VEC)
    errors: list[str] = []
    for name, module in _candidates(sqlite3):
        error = _try_load(module)
        if error is None:
            return Driver(module, name, True)
        errors.append(f"{name}: {error}")
    if not errors:
        return Driver(sqlite3, "sqlite3", False, _NO_LOADER)
    return Driver(sqlite3, "sqlite3", False, "loading sqlite-vec failed (" + "; ".join(errors) + ")")


def _candidates(stdlib: ModuleType) -> list[tuple[str, ModuleType]]:
    found = []
    if hasattr(stdlib.Connection, "enable_load_extension"):
        found.append(("sqlite3", stdlib))
    try:
        from pysqlite3 import dbapi2
    except ImportError:
        return found
    if hasattr(dbapi2.Connection, "enable_load_extension"):
        found.append(("pysqlite3", dbapi2))
    return found


def _try_load(module: ModuleType) -> str | None:
    """Load sqlite-vec into a throwaway connection; the error text, or None when it works."""
    try:
        conn = module.connect(":memory:")
    except Exception as e:
        return str(e)
    try:
        load_vec(conn)
        conn.execute("select vec_version()").fetchone()
        return None
    except Exception as e:
        return str(e) or type(e).__name__
    finally:
        conn.close()


def load_vec(conn: Any) -> None:
    """Load the sqlite-vec extension into ``conn`` and switch extension loading off again."""
    import sqlite_vec

    conn.enable_load_extension(True)
    try:
        sqlite_vec.load(conn)
    finally:
        conn.enable_load_extension(False)


def connect(path: str, allow_vectors: bool = True) -> tuple[Any, Driver]:
    """Open ``path`` (autocommit, usable from any thread) with sqlite-vec loaded when possible."""
    driver = select_driver()
    try:
        conn = driver.module.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
    except driver.module.Error as e:
        raise DatabaseError(f"cannot open the memory database {path}: {e}") from None
    if driver.vectors and allow_vectors:
        try:
            load_vec(conn)
        except Exception as e:
            return conn, Driver(driver.module, driver.name, False, f"loading sqlite-vec failed: {e}")
        return conn, driver
    if not allow_vectors:
        return conn, Driver(driver.module, driver.name, False, "vector search was disabled by the caller")
    return conn, driver


def notice_vectors_off(reason: str) -> None:
    """Warn once per process that semantic search is off, and why."""
    global _noticed
    with _lock:
        if _noticed:
            return
        _noticed = True
    log.warning("long-term memory: semantic search is off because %s; keyword search still works", reason)
