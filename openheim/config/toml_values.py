"""Reading typed values from a config.toml table, each failure a ConfigError naming the key and what it must be."""

from __future__ import annotations

from openheim.config.unknown_keys import note_unknown
from openheim.errors import ConfigError


def where(section: str, key: str) -> str:
    return f"{section}.{key}" if section else key


def get_str(d: dict, key: str, section: str = "", required: bool = False) -> str | None:
    value = d.get(key)
    if value is None:
        if required:
            raise ConfigError(f"missing required key '{where(section, key)}'; add it to config.toml")
        return None
    if not isinstance(value, str):
        raise ConfigError(f"'{where(section, key)}' must be a string, got {type(value).__name__}")
    return value


def present_int(value: int | None) -> int:
    """A value read with a default, which therefore is never None."""
    assert value is not None
    return value


def get_int(
    d: dict, key: str, section: str = "", default: int | None = None, minimum: int = 1, maximum: int | None = None
) -> int | None:
    value = d.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"'{where(section, key)}' must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"'{where(section, key)}' must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"'{where(section, key)}' must be at most {maximum}, got {value}")
    return value


def get_seconds(d: dict, key: str, section: str = "") -> float | None:
    """A positive number of seconds (integer or decimal), or None when absent."""
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"'{where(section, key)}' must be a positive number of seconds, got {value!r}")
    return float(value)


def get_bool(d: dict, key: str, section: str = "", default: bool = False) -> bool:
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"'{where(section, key)}' must be true or false, got {value!r}")
    return value


def get_str_list(d: dict, key: str, section: str = "") -> list[str]:
    value = d.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"'{where(section, key)}' must be a list of strings")
    return list(value)


def get_str_map(d: dict, key: str, section: str = "") -> dict[str, str]:
    value = d.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"'{where(section, key)}' must be a table of strings")
    return dict(value)


def get_table(d: dict, key: str) -> dict:
    value = d.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"'{key}' must be a table ([{key}])")
    return value


def warn_unknown(d: dict, known: set[str], section: str) -> None:
    note_unknown(d, known, section)


# --- sections ---------------------------------------------------------------
