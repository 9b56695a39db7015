"""``[[hooks]]`` in a project's ``.openheim/settings.toml``: used only from files the user trusts.

A repository is code from strangers and a hook runs commands as the user, so a project file's hooks
run only once ``openheim permissions trust FILE`` recorded the file as it is now, with the workspace files
its hooks name (``config.named_files``); until then, or once one of those changed, they are ignored with
one warning per file (and content). Each hook carries those files' hashes, so a script changed during a
turn stops the hook before it runs (``HookSpec.pinned``).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from openheim.config.hooks import HookSpec, parse_hooks
from openheim.config.project_settings import TRUST_FILE, SettingsFile, read_settings
from openheim.config.trust import TRUSTED, pinned_files
from openheim.errors import ConfigError

log = logging.getLogger(__name__)
_warned: set[tuple[str, str, str]] = set()


def load_project_hooks(root: Path, cwd: Path | None, data_dir: Path | None) -> tuple[HookSpec, ...]:
    """The hooks of the trusted project settings files from the root down to ``cwd``, outermost first."""
    hooks: tuple[HookSpec, ...] = ()
    for found in read_settings(root, cwd, data_dir):
        if "hooks" not in found.data:
            continue
        if found.trust != TRUSTED:
            _warn(found)
            continue
        try:
            parsed = parse_hooks(found.data["hooks"], str(found.path))
        except ConfigError as e:
            raise ConfigError(f"{e.message} (in {found.path})") from None
        pinned = pinned_files(data_dir / TRUST_FILE, found.path) if data_dir is not None else {}
        hooks += tuple(replace(h, pinned=pinned) for h in parsed)
    return hooks


def _warn(found: SettingsFile) -> None:
    """One line per file and content: its hooks do not run, and how to make them."""
    key = (str(found.path), found.sha256, found.changed_file or "")
    if key in _warned:
        return
    _warned.add(key)
    if found.changed_file is not None:
        log.warning("%s", found.notice())
        return
    log.warning(
        "%s has hooks that do not run until you trust it: run `openheim permissions trust %s` (hooks run "
        "commands as you)",
        found.path,
        found.path,
    )
