"""The fs sidecar under real races, and what one client can do to the server's memory, time and sockets: a real
`openheim serve` subprocess, WebSocket clients, real files, a thread swapping directories for symlinks."""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest
from fake_llm import Reply
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from ws_client import WsAcp, serve_process

ROUNDS = 300


def strict(text: str):
    """Parse as strict JSON: NaN and infinities are not JSON."""

    def refuse(name):
        raise ValueError(f"{name} in a frame the server sent")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def tree(project):
    """``project/d`` and ``outside`` with the same file names; outside's must never change."""
    outside = project.parent / "outside"
    outside.mkdir()
    (project / "d").mkdir()
    for i in range(ROUNDS):
        (project / "d" / f"f{i}.txt").write_text("inside")
        (outside / f"f{i}.txt").write_text("outside")
    return outside


def assert_untouched(outside: Path) -> None:
    names = sorted(p.name for p in outside.iterdir())
    assert names == sorted(f"f{i}.txt" for i in range(ROUNDS)), set(names) ^ {f"f{i}.txt" for i in range(ROUNDS)}
    assert all((outside / name).read_text() == "outside" for name in names)


class Swapper(threading.Thread):
    """Swaps ``project/d`` for a symlink to ``outside`` and back, as fast as it can, until stopped; it lingers a
    moment in each state, so requests meet both (a thread that held the real ``d`` only between two renames
    could leave a client's requests meeting nothing but the symlink)."""

    def __init__(self, project: Path, outside: Path) -> None:
        super().__init__(daemon=True)
        self.d, self.real, self.outside = project / "d", project / "d.real", outside
        self.stop = threading.Event()
        self.swaps = 0

    def run(self) -> None:
        while not self.stop.is_set():
            os.rename(self.d, self.real)
            self._put(lambda: os.symlink(self.outside, self.d))
            time.sleep(0.0005)
            os.unlink(self.d)
            self._put(lambda: os.rename(self.real, self.d))
            self.swaps += 1
            time.sleep(0.0005)

    def _put(self, place) -> None:
        """Place ``d``; a client's write may have made a fresh ``d`` (missing parents are created): move it aside."""
        while True:
            try:
                return place()
            except OSError:
                os.rename(self.d, self.d.with_name(f"stray-{time.monotonic_ns()}"))

    def __enter__(self) -> Swapper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join(10)


def replies(client: WsAcp, count: int) -> list[dict]:
    return [client.fs.get(timeout=30) for _ in range(count)]


# --- 3. the fs sidecar races ---------------------------------------------------------------------------


def test_deletes_and_writes_never_escape_while_a_directory_is_swapped_for_a_link(srv, project, tree):
    with serve_process(project) as served:
        fs = WsAcp(served, "/ws", token=served.token)
        assert fs.fs.get(timeout=5)["type"] == "connected"
        with Swapper(project, tree) as swapper:
            for i in range(ROUNDS):
                fs.send_fs({"action": "delete", "path": f"d/f{i}.txt"})
                fs.send_fs({"action": "write", "path": f"d/new{i}.txt", "content": "from the client"})
            got = replies(fs, 2 * ROUNDS)
        fs.close()
    assert swapper.swaps > 20
    assert_untouched(tree)
    kinds = {r["type"] for r in got}
    assert "error" in kinds and kinds & {"delete_success", "write_success"}  # the race was real: some went through


def test_a_link_shipped_in_the_tree_and_renamed_by_a_second_socket_leads_nowhere(srv, project, tree):
    os.symlink(tree, project / "l")
    with serve_process(project) as served:
        renamer = WsAcp(served, "/ws", token=served.token)
        deleter = WsAcp(served, "/ws", token=served.token)
        for client in (renamer, deleter):
            assert client.fs.get(timeout=5)["type"] == "connected"
        for _ in range(ROUNDS):  # l and d trade names, over and over
            for source, target in (("l", "t"), ("d", "l"), ("t", "d")):
                renamer.send_fs({"action": "rename", "from": source, "to": target})
        for i in range(ROUNDS):
            deleter.send_fs({"action": "delete", "path": f"d/f{i}.txt"})
            deleter.send_fs({"action": "write", "path": f"d/f{i}.txt", "content": "overwritten"})
        replies(renamer, 3 * ROUNDS)
        replies(deleter, 2 * ROUNDS)
        renamer.close()
        deleter.close()
    assert_untouched(tree)


def test_a_write_replaces_a_hard_linked_file_instead_of_writing_through_it(srv, project, tree):
    os.link(tree / "f0.txt", project / "linked.txt")
    with serve_process(project) as served:
        fs = WsAcp(served, "/ws", token=served.token)
        assert fs.fs.get(timeout=5)["type"] == "connected"
        assert fs.fs_call(action="write", path="linked.txt", content="new")["type"] == "write_success"
        fs.close()
    assert (project / "linked.txt").read_text() == "new"
    assert_untouched(tree)
    assert (tree / "f0.txt").stat().st_nlink == 1


def test_a_watched_directory_swapped_for_a_link_never_shows_outside_names(srv, project, tree):
    (tree / "secret-plan.txt").write_text("outside")
    with serve_process(project) as served:
        fs = WsAcp(served, "/ws", token=served.token)
        assert fs.fs.get(timeout=5)["type"] == "connected"
        assert fs.fs_call(action="watch", path="d")["type"] == "watching"
        os.rename(project / "d", project / "d.real")
        os.symlink(tree, project / "d")
        time.sleep(1.5)
        (tree / "secret-later.txt").write_text("outside")
        time.sleep(1.5)
        events = []
        while not fs.fs.empty():
            events.append(fs.fs.get())
        fs.close()
    seen = json.dumps(events)
    assert "secret" not in seen and str(tree) not in seen
    assert any(e.get("event_kind") == "remove" for e in events)  # the directory it watched is gone


def test_without_openat2_the_walk_holds_the_same_race(project, tree, monkeypatch):
    """Kernels without openat2 (or a seccomp filter refusing it): the component-wise O_NOFOLLOW walk."""
    from openheim.config import openat2
    from openheim.serve.fs_channel import FsChannel

    monkeypatch.setitem(openat2._state, "call", None)
    sent: list[dict] = []
    channel = FsChannel(project, sent.append)
    with Swapper(project, tree) as swapper:
        for i in range(ROUNDS):
            channel.handle({"action": "delete", "path": f"d/f{i}.txt"})
            channel.handle({"action": "write", "path": f"d/new{i}.txt", "content": "x"})
    assert swapper.swaps > 20
    assert_untouched(tree)
    kinds = {r["type"] for r in sent}
    assert "error" in kinds and kinds & {"delete_success", "write_success"}  # the race was real: some went through


# --- 6. one frame must not hold everyone -----------------------------------------------------------------


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_huge_frames_are_refused_unparsed_and_stall_nobody(srv, project):
    with serve_process(project) as served:
        other = WsAcp(served, "/acp", token=served.token)
        other.initialize()
        sid = other.new_session(project)
        before = rss_mb(served.proc.pid)
        url = f"ws://127.0.0.1:{served.port}"
        auth = {"Authorization": f"Bearer {served.token}"}
        done = threading.Event()

        def flood() -> None:
            with connect(f"{url}/acp", additional_headers=auth, max_size=None) as ws:
                ws.send("[" + "{}," * (50 * 1024 * 1024 // 3) + "{}]")  # 50 MB: past every limit
                with pytest.raises(ConnectionClosed) as closed:
                    ws.recv(timeout=10)
                assert closed.value.rcvd.code == 1009
            with connect(f"{url}/acp", additional_headers=auth) as ws:
                ws.send("[" + "{}," * (9 * 1024 * 1024 // 3) + "{}]")  # 9 MiB: past the 8 MiB ACP limit
                answer = json.loads(ws.recv(timeout=10))
                assert answer["error"]["code"] == -32600 and "longer than 8388608 bytes" in answer["error"]["message"]
            with connect(f"{url}/ws", additional_headers=auth) as ws:
                ws.recv(timeout=10)  # connected
                ws.send('{"channel":"agent","data":[' + "{}," * (9 * 1024 * 1024 // 3) + "{}]}")
                answer = json.loads(ws.recv(timeout=10))
                assert answer["channel"] == "system" and "larger than 8388608 bytes" in answer["data"]["message"]
                ws.send(
                    json.dumps(
                        {
                            "channel": "fs",
                            "data": {"action": "write", "path": "big.txt", "content": "x" * (10 * 1024 * 1024)},
                        }
                    )
                )
                assert json.loads(ws.recv(timeout=10))["data"]["type"] == "write_success"  # the fs cap is 16 MiB
                ws.send(
                    json.dumps(
                        {
                            "channel": "fs",
                            "data": {"action": "write", "path": "bigger.txt", "content": "x" * (16 * 1024 * 1024 + 1)},
                        }
                    )
                )
                assert "larger than 16 MiB" in json.loads(ws.recv(timeout=10))["data"]["message"]
            done.set()

        thread = threading.Thread(target=flood, daemon=True)
        thread.start()
        rounds = []
        while not done.is_set() and thread.is_alive():
            srv.enqueue(Reply(text="pong"))
            started = time.monotonic()
            assert other.prompt(sid, "ping")[0]["result"]["stopReason"] == "end_turn"
            rounds.append(time.monotonic() - started)
        thread.join(30)
        assert done.is_set(), "the flooding client's checks failed (see the thread's exception above)"
        after = rss_mb(served.proc.pid)
        other.close()
    assert (project / "big.txt").stat().st_size == 10 * 1024 * 1024 and not (project / "bigger.txt").exists()
    assert max(rounds) < 1.5, rounds
    assert after - before < 250, (before, after)  # the 50 MB frame was never read, the 9 MiB ones never parsed


# --- 7. smaller defects ------------------------------------------------------------------------------------


def test_a_slow_reader_gets_the_whole_rest_reply(srv, project):
    with serve_process(project) as served:
        client = WsAcp(served, "/acp", token=served.token)
        client.initialize()
        sid = client.new_session(project)
        for _ in range(2):
            srv.enqueue(Reply(text="ok"))
            assert client.prompt(sid, "y" * (7 * 1024 * 1024))[0]["result"]["stopReason"] == "end_turn"
        client.close()
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
            s.connect(("127.0.0.1", served.port))
            s.sendall(
                f"GET /api/sessions/{sid} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {served.token}\r\n\r\n".encode()
            )
            chunks, started = [], time.monotonic()
            while chunk := s.recv(16 * 1024):
                chunks.append(chunk)
                time.sleep(0.004)  # a slow reader: about 3 MB/s at best
            took = time.monotonic() - started
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    assert took > 2.5  # longer than the 2 s a reply used to get
    assert int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]) == len(body)
    assert [m["role"] for m in json.loads(body)["messages"]] == ["user", "assistant", "user", "assistant"]


def test_ids_and_nesting_json_cannot_write_are_errors_not_invalid_frames_or_tracebacks(srv, project):
    with serve_process(project) as served:
        auth = {"Authorization": f"Bearer {served.token}"}
        with connect(f"ws://127.0.0.1:{served.port}/ws", additional_headers=auth) as ws:
            assert strict(ws.recv(timeout=10))["data"]["type"] == "connected"
            for frame in (
                '{"channel":"fs","data":{"action":"list","path":".","id":NaN}}',
                '{"channel":"fs","data":{"action":"list","path":".","id":1e400}}',
                '{"channel":"fs","data":{"action":"list","path":".","id":-Infinity}}',
                "[" * 100_000 + "]" * 100_000,
                '{"channel":"fs","data":{"action":"list","path":".","id":' + "[" * 100_000 + "]" * 100_000 + "}}",
            ):
                ws.send(frame)
                answer = strict(ws.recv(timeout=10))
                assert answer["channel"] == "system" and answer["data"]["type"] == "error", answer
            ws.send('{"channel":"fs","data":{"action":"list","path":".","id":7}}')
            assert strict(ws.recv(timeout=10))["data"] == {"type": "file_list", "path": ".", "entries": [], "id": 7}
        with connect(f"ws://127.0.0.1:{served.port}/acp", additional_headers=auth) as ws:
            ws.send("[" * 100_000)
            assert strict(ws.recv(timeout=10))["error"]["code"] == -32700
        code, err = served.stop()
    assert code == 0 and "Traceback" not in err


def test_session_cwd_with_a_nul_byte_or_that_does_not_exist_is_invalid_params(srv, project):
    with serve_process(project) as served:
        client = WsAcp(served, "/acp", token=served.token)
        client.initialize()
        for cwd, words in (
            (f"{project}/a\u0000b", "NUL byte"),
            (f"{project}/missing", "not an existing directory"),
            (f"{project}/file.txt", "not an existing directory"),
        ):
            (project / "file.txt").write_text("x")
            response, _ = client.call("session/new", {"cwd": cwd, "mcpServers": []})
            assert response["error"]["code"] == -32602 and words in response["error"]["message"], response
        client.close()
        _, err = served.stop()
    assert "Traceback" not in err


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy(pid: int, seconds: float) -> float:
    """The share of a core process ``pid`` used over the next ``seconds``."""
    start, started = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - start) / (time.monotonic() - started)


@pytest.fixture
def big_tree(tmp_path):
    """20,000 files in 200 directories, on tmpfs where there is one (creating files elsewhere can be slow)."""
    base = Path(tempfile.mkdtemp(dir="/dev/shm")) if os.path.isdir("/dev/shm") else tmp_path
    project = base / "project"
    for i in range(200):
        sub = project / "tree" / f"d{i}"
        sub.mkdir(parents=True)
        for j in range(100):
            os.close(os.open(sub / f"f{j}", os.O_CREAT | os.O_WRONLY, 0o644))
    yield project
    shutil.rmtree(base, ignore_errors=True)


def test_many_sockets_watching_one_tree_share_one_scan(srv, big_tree):
    project = big_tree
    with serve_process(project) as served:

        def watcher() -> WsAcp:
            client = WsAcp(served, "/ws", token=served.token)
            assert client.fs.get(timeout=10)["type"] == "connected"
            assert client.fs_call(action="watch", path="tree", timeout=30)["type"] == "watching"
            return client

        sockets = [watcher()]
        time.sleep(1.1)
        one = busy(served.proc.pid, 2)
        sockets += [watcher() for _ in range(29)]
        time.sleep(1.1)
        thirty = busy(served.proc.pid, 2)
        (project / "tree" / "d0" / "new").touch()
        for client in sockets:  # every socket still hears about changes
            event = client.fs.get(timeout=5)
            assert event["event_kind"] == "create" and event["paths"] == [str(project / "tree" / "d0" / "new")]
        for client in sockets:
            client.close()
    assert thirty < 3 * one + 0.05, (one, thirty)  # one scan a second for the tree, not one per socket
