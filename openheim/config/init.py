"""`openheim init`: write the starter config.toml and system.md."""

from __future__ import annotations

import shutil
from pathlib import Path

from openheim.config.atomic import replace_text
from openheim.config.load import config_path as locate_config
from openheim.config.load import default_home
from openheim.config.private_data import FILE_MODE, make_private
from openheim.config.template import CONFIG_TEMPLATE, DEFAULT_IDENTITY
from openheim.errors import ConfigError


def _write_atomic(path: Path, text: str) -> None:
    replace_text(path, text, FILE_MODE)  # config.toml may hold an api_key: 0600 whatever the umask


def write_initial_files(config: str | Path | None, force: bool = False) -> tuple[Path, Path]:
    """Create config.toml (refusing to overwrite unless ``force``; then a .bak is kept) and system.md."""
    config_file = locate_config(config)
    system_file = default_home() / "system.md"
    try:
        make_private(config_file.parent)
        make_private(system_file.parent)
        if not system_file.exists():
            _write_atomic(system_file, DEFAULT_IDENTITY + "\n")
        if config_file.exists():
            if not force:
                raise ConfigError(
                    f"config file already exists at {config_file}; keep it, or run "
                    f"`openheim init --force` to replace it (a .bak copy is kept). "
                    f"system.md is at {system_file}"
                )
            shutil.copy2(config_file, config_file.with_name(config_file.name + ".bak"))
        _write_atomic(config_file, CONFIG_TEMPLATE)
    except OSError as e:
        raise ConfigError(f"cannot write {e.filename or config_file}: {e.strerror or e}") from None
    return config_file, system_file
