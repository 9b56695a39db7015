"""The ``[compaction]`` and ``[checkpoints]`` tables, and the context windows providers' models have by default."""

from __future__ import annotations

from dataclasses import dataclass

from openheim.config.unknown_keys import note_unknown
from openheim.errors import ConfigError

MIB = 1024 * 1024

# Context windows in tokens when the config sets none (the smallest of the kind's current models); servers of
# kind openai_compatible run any model, so their window stays unknown unless configured.
DEFAULT_CONTEXT_WINDOWS = {
    "anthropic": 200_000,
    "openai": 128_000,
    "gemini": 1_000_000,
}


@dataclass
class CompactionConfig:
    """``[compaction]``: when the conversation is summarised, and by which model."""

    enabled: bool = True
    compact_at: float = 0.8  # share of the context window a request may reach before compaction
    compaction_model: str | None = None  # "provider/model" (or a model of the session's provider); None: same model
    keep_recent: float = 0.15  # share of the window the recent turns kept verbatim may take


@dataclass
class CheckpointConfig:
    """``[checkpoints]``: what a checkpoint covers and how long the store keeps them."""

    enabled: bool = True
    max_file_bytes: int = 10 * MIB  # bigger files are listed as not restorable
    max_files: int = 100_000  # a root with more files gets no checkpoint (and a warning)
    max_age_days: float = 30.0  # session records older than this are pruned
    max_store_mb: int = 2048  # then the oldest sessions go until the store is this small


def default_context_window(kind: str) -> int | None:
    return DEFAULT_CONTEXT_WINDOWS.get(kind)


def parse_compaction(d: dict) -> CompactionConfig:
    known = {"enabled", "compact_at", "compaction_model", "keep_recent"}
    _unknown(d, known, "compaction")
    out = CompactionConfig()
    out.enabled = _bool(d, "enabled", "compaction", out.enabled)
    out.compact_at = _ratio(d, "compact_at", out.compact_at)
    out.keep_recent = _ratio(d, "keep_recent", out.keep_recent)
    model = d.get("compaction_model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ConfigError("'compaction.compaction_model' must be a model name such as \"anthropic/claude-haiku\"")
    out.compaction_model = model
    return out


def parse_checkpoints(d: dict) -> CheckpointConfig:
    known = {"enabled", "max_file_bytes", "max_files", "max_age_days", "max_store_mb"}
    _unknown(d, known, "checkpoints")
    out = CheckpointConfig()
    out.enabled = _bool(d, "enabled", "checkpoints", out.enabled)
    for key in ("max_file_bytes", "max_files", "max_store_mb"):
        value = d.get(key, getattr(out, key))
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"'checkpoints.{key}' must be a positive integer, got {value!r}")
        setattr(out, key, value)
    age = d.get("max_age_days", out.max_age_days)
    if not isinstance(age, (int, float)) or isinstance(age, bool) or age <= 0:
        raise ConfigError(f"'checkpoints.max_age_days' must be a positive number, got {age!r}")
    out.max_age_days = float(age)
    return out


def _unknown(d: dict, known: set[str], section: str) -> None:
    note_unknown(d, known, section)


def _bool(d: dict, key: str, section: str, default: bool) -> bool:
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"'{section}.{key}' must be true or false, got {value!r}")
    return value


def _ratio(d: dict, key: str, default: float) -> float:
    value = d.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.05 <= value <= 1.0:
        raise ConfigError(f"'compaction.{key}' must be a number between 0.05 and 1.0, got {value!r}")
    return float(value)
