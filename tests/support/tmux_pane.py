"""A program running in a real terminal: a private tmux server, keys in, screen text out.

with TmuxPane(tmp_path, "python -m openheim", env={...}) as pane:
    pane.type("hello"); pane.keys("Enter")
    pane.wait_for("echo: hello")
    pane.resize(40, 10)
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def have_tmux() -> bool:
    return shutil.which("tmux") is not None


class TmuxPane:
    _count = 0
    """One tmux session on its own socket running ``command`` (one simple command: it is exec'ed by /bin/sh,
    so the pane's pid is the program's) in an 80×24 (or given) window."""

    def __init__(
        self,
        tmp_path: Path,
        command: str,
        env: dict[str, str] | None = None,
        width: int = 80,
        height: int = 24,
        cwd: Path | None = None,
    ) -> None:
        TmuxPane._count += 1
        self.socket = str(tmp_path / f"tmux-{TmuxPane._count}.sock")  # a fresh server each time: no shutdown race
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
        full = f"exec env {exports} {command}" if exports else f"exec {command}"  # the pane's pid is the program's
        self._tmux(
            "-f",
            "/dev/null",
            "start-server",
            ";",
            "set-option",
            "-g",
            "remain-on-exit",
            "on",
            ";",
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            str(width),
            "-y",
            str(height),
            "-c",
            str(cwd or tmp_path),
            full,
        )

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, timeout=20)
        if out.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args[:2])} failed: {out.stderr.strip()}")
        return out.stdout

    def __enter__(self) -> TmuxPane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=20)

    # --- input ---

    def type(self, text: str) -> None:
        """Literal text, as if typed."""
        self._tmux("send-keys", "-t", "t", "-l", text)

    def keys(self, *names: str) -> None:
        """Named keys: Enter, Escape, Up, Down, PageUp, C-c, ..."""
        self._tmux("send-keys", "-t", "t", *names)

    def line(self, text: str) -> None:
        self.type(text)
        self.keys("Enter")

    def resize(self, width: int, height: int) -> None:
        self._tmux("resize-window", "-t", "t", "-x", str(width), "-y", str(height))

    # --- output ---

    def screen(self, colours: bool = False) -> str:
        return self._tmux("capture-pane", "-t", "t", "-p", *(["-e"] if colours else []))

    def rows(self) -> list[str]:
        return self.screen().split("\n")

    def wait_for(self, what: str | Callable[[str], bool], timeout: float = 15.0) -> str:
        """Poll the screen until ``what`` shows (a substring or a predicate); AssertionError with the screen if not."""
        check = (lambda s: what in s) if isinstance(what, str) else what
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if check(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what!r}; the screen was:\n{screen}")
            time.sleep(0.05)

    def pane_pid(self) -> int:
        return int(self._tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip())

    def dead(self) -> bool:
        return self._tmux("display-message", "-p", "-t", "t", "#{pane_dead}").strip() == "1"

    def exit_status(self, timeout: float = 10.0) -> int:
        """Wait for the command to end; its exit status."""
        deadline = time.monotonic() + timeout
        while not self.dead():
            if time.monotonic() > deadline:
                raise AssertionError(f"the program did not exit; the screen was:\n{self.screen()}")
            time.sleep(0.05)
        status, _, signal = (
            self._tmux("display-message", "-p", "-t", "t", "#{pane_dead_status}:#{pane_dead_signal}")
            .strip()
            .partition(":")
        )
        if signal:
            return -int(signal)
        return int(status or 0)  # tmux 3.3 shows an exit status of 0 as empty


def openheim_command(*args: str) -> str:
    """The shell command that starts this checkout's openheim with the test's Python."""
    import sys

    return " ".join(shlex.quote(a) for a in (sys.executable, "-m", "openheim", *args))


def tui_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment the TUI runs with: this checkout, the test's OPENHEIM_HOME, a UTF-8 locale."""
    env = {
        "PYTHONPATH": str(ROOT),
        "OPENHEIM_HOME": str(home),
        "HOME": str(home.parent),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "NO_PROXY": "127.0.0.1,localhost",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    env.update(extra)
    return env
