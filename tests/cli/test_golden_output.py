"""Golden tests: the exact bytes users and editors see, pinned before a refactor.

What is pinned (the files live under tests/cli/golden/, see tests/cli/golden/README.md):

* ``openheim run`` as a subprocess against the fake LLM server, for ``--output text|json|stream-json`` in a few
  scripted scenarios: stdout and stderr byte for byte, and the exit code.
* ``openheim acp`` over raw JSON-RPC lines: every frame the agent writes, in order (with the client's own lines
  interleaved in the transcript for readability).
* The on-disk history (``{id}.jsonl`` and ``{id}.json``) of the tool-using ``run`` scenario.

The default run compares; ``OPENHEIM_UPDATE_GOLDEN=1 pytest tests/cli/test_golden_output.py`` rewrites the files from
the current code (review the diff before committing it!).

Only values that differ from run to run are normalised, by ``Normaliser`` below, on the raw text (never on
parsed JSON, so field order and spacing stay pinned): the temp directories, the fake server's URL, UUIDs
(numbered in order of first appearance, so "same id" relations stay pinned) and RFC 3339 timestamps. Tool call
ids are fixed by the scripts, so they need no normalising.

Two things are nondeterministic by design and handled explicitly rather than normalised away:

* Tool calls of one reply run concurrently and their ``tool_result`` events come in completion order (documented
  in openheim/core/tool_calls.py). The scenarios run one tool call per reply, except ``f_parallel`` whose
  ``tool_result`` lines are put back into call order by ``call_order`` (and which has no ``-v`` variant).
* ACP's ``available_commands_update`` is sent by a timer just after the session/new (or load) answer, so its
  position relative to other frames is not fixed: those frames are taken out of the transcript and pinned in a
  file of their own (in the order they arrived), and the test waits for each one before going on.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp_schema_check import check_agent_frame
from acp_wire import AcpWire
from cli_helpers import ROOT, write_config
from fake_llm import FakeLLMServer, Fault, Reply, ToolCall

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("OPENHEIM_UPDATE_GOLDEN") == "1"

# --- golden files ------------------------------------------------------------------------------------------


def check_golden(files: dict[str, str]) -> None:
    """Compare each ``relpath -> text`` with its golden file byte for byte (or rewrite them in update mode).

    Every file is compared before failing, so the message names all that differ; the first one is then
    compared as text for a readable diff (decoding with surrogateescape is lossless, so text equality is
    byte equality).
    """
    if UPDATE:
        for relpath, actual in files.items():
            path = GOLDEN / relpath
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(actual.encode("utf-8", "surrogateescape"))
        return
    missing = [r for r in files if not (GOLDEN / r).is_file()]
    assert not missing, f"missing golden files {missing}; generate them with OPENHEIM_UPDATE_GOLDEN=1"
    differing = [
        r for r, actual in files.items() if actual.encode("utf-8", "surrogateescape") != (GOLDEN / r).read_bytes()
    ]
    if differing:
        first = differing[0]
        expected = decode((GOLDEN / first).read_bytes())
        assert files[first] == expected, f"differs from the golden files: {differing}; first: {first}"
        raise AssertionError(f"differs from the golden files: {differing}")


def decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


# --- normalisation -------------------------------------------------------------------------------------------

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")


@dataclass
class Normaliser:
    """Literal replacements (longest first), then UUIDs → ``<SESSION-n>``, then timestamps → ``<TIME>``.

    The only UUIDs in these outputs are session ids; each distinct one gets its own number, in order of first
    appearance, shared across every text passed through the same Normaliser.
    """

    literals: dict[str, str] = field(default_factory=dict)
    uuids: dict[str, str] = field(default_factory=dict)

    def add_path(self, path: Path, placeholder: str) -> None:
        for form in {str(path), str(path.resolve())}:
            self.literals[form] = placeholder

    def __call__(self, text: str) -> str:
        for literal in sorted(self.literals, key=len, reverse=True):
            text = text.replace(literal, self.literals[literal])
        text = UUID_RE.sub(lambda m: self.uuids.setdefault(m.group(), f"<SESSION-{len(self.uuids) + 1}>"), text)
        return TIME_RE.sub("<TIME>", text)


# --- openheim run -------------------------------------------------------------------------------------------

NOTES = "the answer is 42\nsecond line: ünïcode ✓\n"


@dataclass
class Scenario:
    replies: list
    prompt: str = "what do my notes say?"
    args: tuple = ()
    verbose_variants: tuple = ()  # outputs that also get a `-v` run (stderr activity lines)
    reorder: Callable[[str], str] | None = None  # an explicit, documented canonicalisation of stream-json stdout


def call_order(stdout: str) -> str:
    """Put each run of consecutive stream-json ``tool_result`` lines into call order.

    Parallel tool calls report results in completion order, which varies from run to run; the call order is
    the order of the ``tool_call`` lines just before. Every line keeps its exact bytes.
    """
    lines = stdout.splitlines(keepends=True)
    order: dict[str, int] = {}
    out: list[str] = []
    i = 0
    while i < len(lines):
        event = json.loads(lines[i])
        if event.get("type") == "tool_call":
            order[event["id"]] = len(order)
        if event.get("type") != "tool_result":
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and json.loads(lines[j]).get("type") == "tool_result":
            j += 1
        out += sorted(lines[i:j], key=lambda line: order[json.loads(line)["id"]])
        i = j
    return "".join(out)


SCENARIOS: dict[str, Scenario] = {
    # (a) plain text streamed in several chunks, with usage
    "a_text": Scenario(
        [Reply(text="Hello there, world! Grüße ✓ — streamed in small chunks.", chunk_size=7, usage=(12, 9))],
        prompt="say hello",
    ),
    # (b) thinking + text + read_file, then a bare list_dir, then the final text
    "b_tools": Scenario(
        [
            Reply(
                thinking="Let me look at the notes.",
                text="Checking the notes.",
                tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="call_read_1")],
                usage=(100, 20),
            ),
            Reply(tool_calls=[ToolCall("list_dir", {}, id="call_list_2")], usage=(130, 5)),
            Reply(text="The notes say 42.\nThat is all.", usage=(150, 8, 64)),
        ],
        verbose_variants=("text", "stream-json"),
    ),
    # (c) a side-effect call denied by --approve none, then the model gives up
    "c_denied": Scenario(
        [
            Reply(
                text="I will write it.",
                tool_calls=[ToolCall("write_file", {"path": "out.txt", "content": "x\n"}, id="call_write_1")],
                usage=(90, 12),
            ),
            Reply(text="I was not allowed to write out.txt.", usage=(120, 9)),
        ],
        prompt="write out.txt",
        args=("--approve", "none"),
        verbose_variants=("text",),
    ),
    # (d) the provider answers HTTP 401
    "d_http_401": Scenario(
        [Fault(status=401, body={"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})],
        prompt="hi",
    ),
    # (e) still calling tools at --max-iterations 2: exit 3 and a notice
    "e_max_iterations": Scenario(
        [
            Reply(tool_calls=[ToolCall("list_dir", {}, id="call_list_1")], usage=(80, 4)),
            Reply(
                text="Still looking.",
                tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="call_read_2")],
                usage=(95, 6),
            ),
        ],
        prompt="keep looking",
        args=("--max-iterations", "2"),
        verbose_variants=("text",),
    ),
    # (f) two tool calls in one reply (they run concurrently), then the final text
    "f_parallel": Scenario(
        [
            Reply(
                text="Both at once.",
                tool_calls=[
                    ToolCall("read_file", {"path": "notes.txt"}, id="call_read_1"),
                    ToolCall("list_dir", {}, id="call_list_2"),
                ],
                usage=(100, 20),
            ),
            Reply(text="Done.", usage=(150, 3)),
        ],
        reorder=call_order,
    ),
}


def run_cli(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    """The real CLI as a subprocess, stdout/stderr as raw bytes, UTF-8 mode whatever the host locale."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYTHONUTF8": "1",
        "HOME": str(home.parent),
        "OPENHEIM_HOME": str(home),
    }
    return subprocess.run(
        [sys.executable, "-m", "openheim", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


@dataclass
class RunResult:
    code: int
    stdout: str
    stderr: str
    home: Path
    norm: Normaliser


def run_variant(tmp_path: Path, scenario: Scenario, name: str, output: str, verbose: bool) -> RunResult:
    """One `openheim run` with its own fake server, home and working directory."""
    base = tmp_path / name
    cwd, home = base / "project", base / "home" / ".openheim"
    cwd.mkdir(parents=True)
    home.mkdir(parents=True, mode=0o700)  # as openheim makes it: no repair line in the golden stderr
    (cwd / "notes.txt").write_text(NOTES, encoding="utf-8")
    with FakeLLMServer(wire="openai") as srv:
        write_config(home, srv.base_url)
        srv.enqueue(*scenario.replies)
        args = ["run", "--output", output, *(["-v"] if verbose else []), *scenario.args, scenario.prompt]
        proc = run_cli(*args, cwd=cwd, home=home)
        assert srv.pending == 0, "the scenario's script was not used up"
    norm = Normaliser()
    norm.add_path(cwd, "<CWD>")
    norm.add_path(home, "<HOME>")
    norm.literals[srv.url] = "<SERVER>"
    stdout = norm(decode(proc.stdout))
    if scenario.reorder is not None and output == "stream-json":
        stdout = scenario.reorder(stdout)
    return RunResult(proc.returncode, stdout, norm(decode(proc.stderr)), home, norm)


def variants(scenario: Scenario) -> list[tuple[str, bool]]:
    return [(o, False) for o in ("text", "json", "stream-json")] + [(o, True) for o in scenario.verbose_variants]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_run_output(name: str, tmp_path: Path) -> None:
    """Every variant of a scenario runs at once (each has its own server, home and cwd, so they cannot mix)."""
    scenario = SCENARIOS[name]
    labels = {output + ("-v" if verbose else ""): (output, verbose) for output, verbose in variants(scenario)}
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {label: pool.submit(run_variant, tmp_path, scenario, label, *how) for label, how in labels.items()}
        results = {label: future.result() for label, future in futures.items()}
    files = {}
    for label, result in results.items():
        files[f"run/{name}/{label}.stdout"] = result.stdout
        files[f"run/{name}/{label}.stderr"] = result.stderr
    codes = {label: result.code for label, result in results.items()}
    files[f"run/{name}/exit_codes.json"] = json.dumps(codes, indent=2) + "\n"
    if name == "b_tools":
        files.update(history_files(results["stream-json"]))
    if name == "c_denied":
        assert not any((tmp_path / label / "project" / "out.txt").exists() for label in labels)
    check_golden(files)


def history_files(result: RunResult) -> dict[str, str]:
    """(3) The on-disk history of the tool-using run: the file names, the message log and the metadata."""
    history = result.home / "history"
    names = sorted(result.norm(p.name) for p in history.iterdir())
    (session,) = [p.stem for p in history.glob("*.jsonl")]
    return {
        "history/b_tools.files": "".join(n + "\n" for n in names),
        "history/b_tools.jsonl": result.norm(decode((history / f"{session}.jsonl").read_bytes())),
        "history/b_tools.json": result.norm(decode((history / f"{session}.json").read_bytes())),
    }


# --- openheim acp ------------------------------------------------------------------------------------------


class Transcript(AcpWire):
    """An AcpWire that keeps the exact bytes of every line: ``-> `` what we sent, ``<- `` what the agent wrote.

    ``available_commands_update`` frames (sent by a timer) go to ``timer_lines`` instead, in arrival order.
    """

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.lines: list[str] = []
        self.timer_lines: list[str] = []
        self.stderr_done = threading.Event()
        super().__init__(*args, **kw)

    def send_raw(self, data: bytes) -> None:
        self.lines += ["-> " + decode(line) + "\n" for line in data.splitlines()]
        super().send_raw(data)

    def _read_stderr(self) -> None:
        super()._read_stderr()
        self.stderr_done.set()

    def next_frame(self, timeout: float = 10.0) -> dict | None:
        """AcpWire.next_frame (parse, schema check), recording the line's exact bytes first."""
        try:
            line = self.frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no frame within {timeout} s; stderr: {self.stderr.decode()[-2000:]}") from None
        if line is None:
            return None
        assert line.endswith(b"\n") and line.count(b"\n") == 1, line
        frame = json.loads(line)
        if self.validate:
            check_agent_frame(frame, self.client_methods)
        self.seen.append(frame)
        update = frame["params"].get("update", {}) if frame.get("method") == "session/update" else {}
        target = self.timer_lines if update.get("sessionUpdate") == "available_commands_update" else self.lines
        target.append("<- " + decode(line))
        return frame

    def wait_for_commands(self, count: int) -> None:
        """Read frames until ``count`` available_commands_update frames have arrived in all (nothing else may)."""
        recorded = len(self.lines)
        while len(self.timer_lines) < count:
            frame = self.next_frame()
            assert frame is not None, "the agent exited"
            assert len(self.lines) == recorded, f"unexpected frame while waiting for the commands update: {frame}"

    def finish(self) -> int:
        """Close stdin and record whatever the agent still writes until it exits."""
        self.proc.stdin.close()
        while self.next_frame(timeout=10) is not None:
            pass
        code = self.proc.wait(10)
        assert self.stderr_done.wait(10), "stderr did not reach EOF"
        return code


class FsClient:
    """The editor side of fs/read_text_file, fs/write_text_file and session/request_permission.

    A missing file is answered with a JSON-RPC error (-32002, resource not found), as editors do.
    """

    def __init__(self, wire: Transcript, permission: str = "allow_once") -> None:
        self.wire, self.permission = wire, permission

    def __call__(self, frame: dict) -> Any:
        method, params = frame["method"], frame["params"]
        if method == "fs/read_text_file":
            try:
                return {"content": Path(params["path"]).read_text(encoding="utf-8")}
            except FileNotFoundError:
                self.wire.send(
                    {"jsonrpc": "2.0", "id": frame["id"], "error": {"code": -32002, "message": "Resource not found"}}
                )
                return None
        if method == "fs/write_text_file":
            Path(params["path"]).write_text(params["content"], encoding="utf-8")
            return {}
        if method == "session/request_permission":
            return {"outcome": {"outcome": "selected", "optionId": self.permission}}
        raise AssertionError(f"unexpected agent request {frame}")


TURN = [  # write_file (permission, diff), edit_file (permission, diff), read_file, then the final text
    Reply(
        thinking="The user wants a greeting file, then a small edit.",
        text="I will create hello.txt.",
        tool_calls=[ToolCall("write_file", {"path": "hello.txt", "content": "hello\nworld\n"}, id="call_write_1")],
        usage=(120, 30),
    ),
    Reply(
        text="Now the edit.",
        tool_calls=[
            ToolCall("edit_file", {"path": "hello.txt", "old_string": "world", "new_string": "there"}, id="call_edit_2")
        ],
        usage=(160, 25),
    ),
    Reply(tool_calls=[ToolCall("read_file", {"path": "hello.txt"}, id="call_read_3")], usage=(200, 10)),
    Reply(text='Done: hello.txt now says "hello there".', chunk_size=9, usage=(230, 12, 100)),
]
CANCELLED_TURN = [
    Reply(
        text="Removing the file.",
        tool_calls=[ToolCall("write_file", {"path": "gone.txt", "content": ""}, id="call_write_9")],
        usage=(90, 7),
    ),
]


@pytest.fixture
def acp_srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url, provider_extra="context_window = 32000")
        yield server


def acp_normaliser(project: Path, home: Path, srv: FakeLLMServer) -> Normaliser:
    norm = Normaliser()
    norm.add_path(project, "<CWD>")
    norm.add_path(home, "<HOME>")
    norm.literals[srv.url] = "<SERVER>"
    return norm


def test_acp_frames(acp_srv: FakeLLMServer, isolated_home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    project = project.resolve()
    norm = acp_normaliser(project, isolated_home, acp_srv)

    # A: an editor with fs read/write: a new session, a turn with write/edit/read, options, list.
    a = Transcript()
    try:
        a.result(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False},
            },
        )
        sid = a.new_session(project)
        a.wait_for_commands(1)
        acp_srv.enqueue(*TURN)
        response, _ = a.prompt(sid, "Create hello.txt, then say hello there", on_request=FsClient(a))
        assert response["result"]["stopReason"] == "end_turn" and response["result"]["_meta"]["openheim"]["usage"]
        assert (project / "hello.txt").read_text() == "hello\nthere\n"
        a.result("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "fake/other-model"})
        a.result("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "architect"})
        a.result("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "code"})
        a.result("session/list", {})
        assert a.finish() == 0
    finally:
        a.close()
    assert acp_srv.pending == 0

    # B: an editor without fs capabilities: load (replay) that session, list, then a second turn on it that is
    # cancelled while its permission request is pending. Not the session's first turn, so no title update: the
    # frames are then the same whether the turn or the 0.8 s cancel grace timer answers first.
    b = Transcript()
    try:
        b.result("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        b.result("session/load", {"sessionId": sid, "cwd": str(project), "mcpServers": []})
        b.wait_for_commands(1)
        b.result("session/list", {"cwd": str(project)})
        acp_srv.enqueue(*CANCELLED_TURN)
        request_id = b.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "remove it"}]})
        permission = b.next_frame()
        while permission.get("method") != "session/request_permission":
            permission = b.next_frame()
        b.notify("session/cancel", {"sessionId": sid})
        response, _ = b.until_response(request_id, on_request=lambda f: None)
        assert response["result"] == {"stopReason": "cancelled"}
        b.send({"jsonrpc": "2.0", "id": permission["id"], "result": {"outcome": {"outcome": "cancelled"}}})
        assert b.finish() == 0
    finally:
        b.close()
    assert not (project / "gone.txt").exists()

    files = {}
    for name, wire in (("a_fs_client", a), ("b_plain_client", b)):
        files[f"acp/{name}.transcript"] = norm("".join(wire.lines))
        files[f"acp/{name}.timer_frames"] = norm("".join(wire.timer_lines))
        files[f"acp/{name}.stderr"] = norm(decode(bytes(wire.stderr)))
    check_golden(files)
