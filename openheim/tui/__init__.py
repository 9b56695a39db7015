"""The curses chat (`openheim` with no subcommand): a front end on OpenheimClient, like `run` and `acp`.

``run_tui`` owns the terminal for the app's lifetime: logs go to ``{data_dir}/openheim.log`` (stderr too,
so nothing lands on the screen), signals become flags for the UI loop, and the terminal is restored on
every way out, with a crash's traceback printed only after that.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from typing import TYPE_CHECKING

from openheim.core.signals import SignalRoute

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from openheim.client import OpenheimClient


def run_tui(client: OpenheimClient, skills: list[str], version: str) -> int:
    """Open a session and run the chat until the user quits; returns the process exit code."""
    from openheim.tui.app import App
    from openheim.tui.screen import Screen, environment_has_no_color, terminal

    session = client.new_session(os.getcwd(), skills=skills)
    app = App(client, session, skills, version)
    restore_logs = _log_to_file(client.data_dir / "openheim.log")
    route = SignalRoute(app.on_signal)
    crash: str | None = None
    try:
        with terminal() as stdscr:
            code = app.run(Screen(stdscr, app.theme, color=not environment_has_no_color()))
    except Exception:
        crash = traceback.format_exc()
        code = 1
    finally:
        app.questions.close()
        restore_logs()
        route.restore()
    if crash:
        logging.getLogger(__name__).error("the TUI crashed:\n%s", crash)
        sys.stderr.write(crash)
    _close(client)
    return code


def _close(client: OpenheimClient) -> None:
    """Cancel what still runs and let it save (the sessions' histories stay on disk)."""
    try:
        client.close()
    except Exception:
        logging.getLogger(__name__).exception("closing the client failed")


def _log_to_file(path: Path) -> Callable[[], None]:
    """Send logging, and anything written to stderr, to ``path`` while the screen is ours; returns an undo."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    saved_fd = None
    try:
        log_file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the session
    except OSError:
        log_file = None
    for h in handlers:
        root.removeHandler(h)
    if log_file is not None:
        handler: logging.Handler = logging.StreamHandler(log_file)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        sys.stderr.flush()
        saved_fd = os.dup(2)
        os.dup2(log_file.fileno(), 2)
    else:
        handler = logging.NullHandler()
    root.addHandler(handler)

    def undo() -> None:
        root.removeHandler(handler)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)
        if saved_fd is not None:
            sys.stderr.flush()
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
        if log_file is not None:
            log_file.close()

    return undo
