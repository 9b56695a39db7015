"""The one place every child process's environment is built (shell, sandbox helper, hooks, MCP stdio servers,
ripgrep, subagents' tools): openheim's own secrets never reach a child; a sandboxed command also loses the
variables that name a way out of the sandbox (a tmux/screen server, the D-Bus session bus, ssh/gpg agents,
docker, X11/Wayland), unless the user keeps them (``[sandbox] keep_env``).

Standard library only: the sandbox helper (``python -I -S``) imports it too.
tests/test_child_env.py finds every process spawn in the package and checks it goes through here.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable, Mapping

# Always openheim's, whatever the config says: the serve token and the providers' conventional key variables.
ALWAYS_SECRET = frozenset(
    {
        "OPENHEIM_SERVE_TOKEN",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "OPENROUTER_API_KEY",
        "GROQ_API_KEY",
        "MISTRAL_API_KEY",
        "DEEPSEEK_API_KEY",
        "XAI_API_KEY",
        "TOGETHER_API_KEY",
        "FIREWORKS_API_KEY",
    }
)
# Variables naming a channel to something that runs code outside the sandbox (or signs as the user).
CHANNELS = frozenset(
    {
        "TMUX",
        "TMUX_PANE",
        "STY",
        "WINDOW",
        "DBUS_SESSION_BUS_ADDRESS",
        "DBUS_SYSTEM_BUS_ADDRESS",
        "SSH_AUTH_SOCK",
        "SSH_AGENT_PID",
        "GPG_AGENT_INFO",
        "DOCKER_HOST",
        "CONTAINER_HOST",
        "DISPLAY",
        "XAUTHORITY",
        "WAYLAND_DISPLAY",
        "XDG_RUNTIME_DIR",
        "KITTY_LISTEN_ON",
        "KITTY_WINDOW_ID",
        "WEZTERM_UNIX_SOCKET",
        "NVIM",
        "NVIM_LISTEN_ADDRESS",
        "VSCODE_IPC_HOOK_CLI",
        "SYSTEMD_EXEC_PID",
        "ZELLIJ",
        "ZELLIJ_SESSION_NAME",
    }
)
_FROZEN_OWN = ("LD_LIBRARY_PATH_ORIG", "_MEIPASS2")

_registered: set[str] = set()
_lock = threading.Lock()


def register_secrets(names: Iterable[str]) -> None:
    """Add the names of secrets the config uses (key variables, MCP servers' env keys) for every later child."""
    with _lock:
        _registered.update(n for n in names if n)


def secret_names() -> frozenset[str]:
    with _lock:
        return ALWAYS_SECRET | _registered


def child_environ(
    base: Mapping[str, str] | None = None,
    *,
    secrets: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
    sandboxed: bool = False,
    keep: Iterable[str] = (),
) -> dict[str, str]:
    """``base`` (default: this process's environment) without openheim's secrets (``secrets``, the registered
    ones and ``ALWAYS_SECRET``) nor a frozen binary's own variables; when ``sandboxed``, also without the
    ``CHANNELS`` not in ``keep``. ``extra`` (an MCP entry's own ``env``) is added last: a key reaches a child
    only when its entry names it."""
    env = dict(os.environ if base is None else base)
    for name in secret_names().union(secrets):
        env.pop(name, None)
    if sandboxed:
        kept = set(keep)
        for name in CHANNELS - kept:
            env.pop(name, None)
    _drop_bootloader(env)
    if extra:
        env.update(extra)
    return env


def _drop_bootloader(env: dict[str, str]) -> None:
    """A frozen openheim's bootloader sets LD_LIBRARY_PATH and ``_PYI_*``; a child that kept them would load our
    bundled libraries, and a second frozen openheim started from it would refuse to run."""
    touched = any(n.startswith("_PYI_") or n in _FROZEN_OWN for n in env) or "_MEI" in env.get("LD_LIBRARY_PATH", "")
    if not getattr(sys, "frozen", False) or not touched:
        return  # not frozen, or already cleaned (the fork server's children get what openheim sent)
    original = env.pop("LD_LIBRARY_PATH_ORIG", None)
    env.pop("LD_LIBRARY_PATH", None)
    if original is not None:
        env["LD_LIBRARY_PATH"] = original
    for name in [n for n in env if n.startswith("_PYI_") or n == "_MEIPASS2"]:
        del env[name]
