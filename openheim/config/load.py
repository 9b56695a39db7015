"""Where the config and data live, and loading config.toml."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from openheim.config.regular_file import read_regular
from openheim.config.schema import Config, parse_config
from openheim.errors import ConfigError

MAX_CONFIG_BYTES = 1 << 20


def default_home() -> Path:
    """``$OPENHEIM_HOME``, else ``~/.openheim``."""
    env = os.environ.get("OPENHEIM_HOME", "").strip()
    if env:
        return Path(env).expanduser()
    home = Path.home() if os.environ.get("HOME") or os.name != "posix" else None
    if home is None:
        raise ConfigError("Could not determine home directory; set HOME or OPENHEIM_HOME")
    return home / ".openheim"


def config_path(explicit: str | Path | None = None) -> Path:
    """--config > OPENHEIM_CONFIG > $OPENHEIM_HOME/config.toml > ~/.openheim/config.toml."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("OPENHEIM_CONFIG", "").strip()
    if env:
        return Path(env).expanduser()
    return default_home() / "config.toml"


def data_dir(config: Config | None, override: str | Path | None = None) -> Path:
    """builder data_dir > config data_dir > OPENHEIM_HOME > ~/.openheim; ConfigError when it is a file."""
    if override:
        path = Path(override).expanduser()
    elif config is not None and config.data_dir:
        path = config.data_dir
    else:
        path = default_home()
    if path.exists() and not path.is_dir():
        raise ConfigError(
            f"the data directory {path} is a file, not a directory; point data_dir in config.toml "
            "(or OPENHEIM_HOME) at a directory"
        )
    return path


def load_config(path: str | Path | None = None) -> Config:
    """Read and validate config.toml; every failure is a ConfigError saying what to fix."""
    p = config_path(path)

    try:  # capped, and only a regular file: /dev/zero or a FIFO must not eat memory or hang the start
        raw = read_regular(
            p, MAX_CONFIG_BYTES, f"config file {p}", "point --config (or OPENHEIM_CONFIG) at your config.toml"
        )
    except FileNotFoundError:
        raise ConfigError(f"Config file not found at {p}. Run `openheim init` to create one.") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file {p} is larger than {MAX_CONFIG_BYTES >> 20} MiB; "
            "point --config (or OPENHEIM_CONFIG) at your config.toml"
        )
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{p} is not valid UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"TOML parse error in {p}: {e}") from None
    except RecursionError:
        raise ConfigError(f"TOML parse error in {p}: nested too deeply") from None
    try:
        return parse_config(data, p)
    except ConfigError as e:
        raise ConfigError(f"{e.message} (in {p})") from None
