"""`openheim run` driving web_fetch at a page server on 127.0.0.1, as a user's model would.

web_fetch refuses loopback addresses, and no config can change that. So the subprocess starts through
``LAUNCH``, which only adds 127.0.0.1 to the tool's constructor-only test seam (``allowed_addresses``)
before it runs the real `openheim` entry point; everything else (CLI, fake provider, sockets) is real.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cli_helpers import ROOT, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

LAUNCH = (
    "import sys\n"
    "import openheim.tools.web_fetch as w\n"
    "init = w.WebFetchTool.__init__\n"
    "def loopback(self, resolver=None, **kw):\n"
    "    init(self, resolver, allowed_addresses=['127.0.0.1'], **kw)\n"
    "w.WebFetchTool.__init__ = loopback\n"
    "from openheim.__main__ import main\n"
    "sys.argv = ['openheim', *sys.argv[1:]]\n"
    "main()\n"
)

Route = tuple[dict[str, str], bytes]  # response headers, body


@contextmanager
def page_server(routes: dict[str, Route]) -> Iterator[int]:
    """An HTTP server on 127.0.0.1 answering each path with its headers and body; yields its port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            headers, body = routes.get(self.path, ({}, b""))
            self.send_response(200 if self.path in routes else 404)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:
                pass

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def fetch_through_run(home: Path, cwd: Path, url: str) -> str:
    """The tool result `openheim run` sent back to the model after its web_fetch of ``url``."""
    with FakeLLMServer(wire="openai") as srv:
        write_config(home, srv.base_url)
        srv.enqueue(Reply(tool_calls=[ToolCall("web_fetch", {"url": url})]), Reply(text="done"))
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        r = subprocess.run(
            [sys.executable, "-c", LAUNCH, "run", "fetch it"],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout == "done\n"
        tool_msg = srv.requests[1].body["messages"][-1]
    assert tool_msg["role"] == "tool"
    return tool_msg["content"]
