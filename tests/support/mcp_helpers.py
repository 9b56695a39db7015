"""Helpers for the MCP tests: the real test server (tests/support/mcp_server.py) over stdio or HTTP, and
finding the processes a test started (by a unique tag on their command line)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

SERVER = str(Path(__file__).resolve().parent / "mcp_server.py")
PYTHON = sys.executable


def new_tag() -> str:
    return f"mcp-test-{uuid.uuid4().hex[:12]}"


def stdio_server(tag: str | None = None, **extra: object) -> dict:
    """A stdio server entry (dict form) running the test server with ``--tag``."""
    args = [SERVER] + (["--tag", tag] if tag else [])
    return {"command": PYTHON, "args": args, **extra}


def toml_server(name: str, tag: str | None = None, extra: str = "", args: tuple[str, ...] = ()) -> str:
    args_text = ", ".join(f'"{a}"' for a in [SERVER, *args] + (["--tag", tag] if tag else []))
    return f'\n[mcp_servers.{name}]\ncommand = "{PYTHON}"\nargs = [{args_text}]\n{extra}\n'


def pids_with(tag: str) -> list[int]:
    """Live (not zombie) processes whose command line contains ``tag``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if tag.encode() in cmdline and stat.rsplit(")", 1)[-1].split()[0] != "Z":
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def wait_until(predicate, timeout: float = 10.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


class HttpServer:
    """The test server over streamable HTTP on 127.0.0.1 (a real uvicorn process)."""

    def __init__(self, tag: str | None = None, name: str = "fake", port: int = 0, sse: bool = False) -> None:
        self.tag = tag or new_tag()
        self.proc = subprocess.Popen(
            [
                PYTHON,
                SERVER,
                "--http",
                "--name",
                name,
                "--tag",
                self.tag,
                "--port",
                str(port),
                *(["--sse"] if sse else []),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the HTTP test server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}/" + ("sse" if sse else "mcp")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def offered(request) -> set[str]:
    """The tool names an OpenAI-wire request offered the model."""
    return {t["function"]["name"] for t in request.body.get("tools", [])}
