"""Where the config and data live, and loading config.toml."""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

from openheim.config.schema import Config, parse_config
from openheim.errors import ConfigError


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
    """builder data_dir > config data_dir > OPENHEIM_HOME > ~/.openheim."""
    if override:
        return Path(override).expanduser()
    if config is not None and config.data_dir:
        return config.data_dir
    return default_home()


def load_config(path: str | Path | None = None) -> Config:
    """Read and validate config.toml; every failure is a ConfigError saying what to fix."""
    p = config_path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"Config file not found at {p}. Run `openheim init` to create one.") from None
    except OSError as e:
        raise ConfigError(f"cannot read config file {p}: {e.strerror or e}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{p} is not valid UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"TOML parse error in {p}: {e}") from None
    try:
        return parse_config(data, p)
    except ConfigError as e:
        raise ConfigError(f"{e.message} (in {p})") from None
