"""Many clients at once: 50 sockets prompting concurrently, none held up by one that never reads."""

from __future__ import annotations

import json
import socket
import threading
import time

from acp_wire import agent_text
from fake_llm import Reply
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from ws_client import TOKEN, WsAcp, running_server

SOCKETS = 50
BIG_REPLY_CHARS = 6_000_000


def _silent_client(server, project):
    """A client with a tiny receive buffer that will stop reading once its session exists."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    ws = connect(
        f"ws://127.0.0.1:{server.port}/acp",
        sock=sock,
        max_queue=1,
        additional_headers={"Authorization": f"Bearer {TOKEN}"},
    ).__enter__()

    def call(request_id: int, method: str, params: dict) -> dict:
        ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        while True:
            frame = json.loads(ws.recv(timeout=10))
            if frame.get("id") == request_id:
                return frame["result"]

    call(1, "initialize", {"protocolVersion": 1})
    return ws, call(2, "session/new", {"cwd": str(project), "mcpServers": []})["sessionId"]


def test_fifty_sockets_prompt_at_once_and_a_client_that_never_reads_is_dropped(srv, project):
    with running_server(project, token=TOKEN, max_pending=256 * 1024) as server:
        silent, silent_sid = _silent_client(server, project)
        srv.enqueue(Reply(text="x" * BIG_REPLY_CHARS, chunk_size=4000))
        silent.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "session/prompt",
                    "params": {"sessionId": silent_sid, "prompt": [{"type": "text", "text": "flood"}]},
                }
            )
        )
        deadline = time.monotonic() + 10
        while not srv.requests:  # the flood is on its way before the others start
            assert time.monotonic() < deadline
            time.sleep(0.01)

        clients = [WsAcp(server, "/acp", token=TOKEN) for _ in range(SOCKETS)]
        results: dict[int, tuple] = {}

        def run(i: int, client: WsAcp) -> None:
            start = time.monotonic()
            client.initialize()
            sid = client.new_session(project)
            response, frames = client.prompt(sid, f"client {i}", timeout=60)
            results[i] = (response["result"]["stopReason"], agent_text(frames), time.monotonic() - start)

        started = time.monotonic()
        threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        elapsed = time.monotonic() - started
        assert sorted(results) == list(range(SOCKETS)), f"{len(results)} of {SOCKETS} finished"
        assert all(r[0] == "end_turn" and r[1] == f"echo: client {i}" for i, r in results.items())
        assert elapsed < 30, f"50 concurrent prompts took {elapsed:.1f} s"

        # the silent client was cut off rather than buffered: its socket is gone, the server holds no peer for it
        deadline = time.monotonic() + 15
        while len(server.peers) > SOCKETS and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.peers) == SOCKETS, "the client that stopped reading is still connected"
        received = 0
        try:
            while True:
                received += len(silent.recv(timeout=15))
        except ConnectionClosed:
            pass
        assert received < BIG_REPLY_CHARS
        for client in clients:
            client.close()
