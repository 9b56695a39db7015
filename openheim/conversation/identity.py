"""The agent identity: ``{data_dir}/system.md``, read on every turn, with a built-in default."""

from __future__ import annotations

from pathlib import Path

from openheim.config.bounded_read import read_bounded
from openheim.errors import ConfigError

DEFAULT_IDENTITY = "You are Openheim, a multipurpose, multiprovider LLM agent."
SYSTEM_FILE = "system.md"
MAX_IDENTITY_BYTES = 1 << 20


def load_identity(data_dir: Path | str) -> str:
    """The text of ``system.md`` (whitespace kept); the default identity when the file is missing."""
    path = Path(data_dir) / SYSTEM_FILE
    try:
        return read_bounded(path, MAX_IDENTITY_BYTES).decode("utf-8")
    except FileNotFoundError:
        return DEFAULT_IDENTITY
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(
            f"could not read the identity file {path}: {e}; fix it or delete it to use the default identity"
        ) from None
