"""``[[hooks]]`` in a project's ``.openheim/settings.toml``: used only from files the user trusts.

A repository is code from strangers and a hook runs commands as the user, so a project file's hooks
run only once ``openheim permissions trust FILE`` recorded the file as it is now; until then they are
ignored with one warning per file (and content).
"""

from __future__ import annotations

import logging
from pathlib import Path

from openheim.config.hooks import HookSpec, parse_hooks
from openheim.config.project_settings import read_settings
from openheim.config.trust import TRUSTED
from openheim.errors import ConfigError

log = logging.getLogger(__name__)
_warned: set[tuple[str, str]] = set()


def load_project_hooks(root: Path, cwd: Path | None, data_dir: Path | None) -> tuple[HookSpec, ...]:
    """The hooks of the trusted project settings files from the root down to ``cwd``, outermost first."""
    hooks: tuple[HookSpec, ...] = ()
    for found in read_settings(root, cwd, data_dir):
        if "hooks" not in found.data:
            continue
        if found.trust != TRUSTED:
            if (str(found.path), found.sha256) not in _warned:
                _warned.add((str(found.path), found.sha256))
                log.warning(
                    "%s has hooks that do not run until you trust it: run `openheim permissions trust "
                    "%s` (hooks run commands as you)",
                    found.path,
                    found.path,
                )
            continue
        try:
            hooks += parse_hooks(found.data["hooks"], str(found.path))
        except ConfigError as e:
            raise ConfigError(f"{e.message} (in {found.path})") from None
    return hooks
