"""`openheim serve` started in one project lists and opens only that project's sessions; opening another
directory's says what to run instead; an unreadable stored session is a JSON 4xx, never a traceback."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from cli_helpers import openheim
from ws_client import TOKEN, WsAcp, running_server, serve_process


def get(base: str, path: str, token: str) -> tuple[int, object]:
    request = urllib.request.Request(f"{base}{path}", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.load(e)


def _stored_session(cwd: Path, prompt: str) -> str:
    """A session `openheim run` stores for a turn in ``cwd``; its id."""
    r = openheim("run", "-o", "json", prompt, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["session_id"]


@pytest.fixture
def two_projects(srv, project, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return _stored_session(project, "here"), _stored_session(elsewhere.resolve(), "there"), elsewhere.resolve()


def test_serve_lists_and_opens_only_the_sessions_of_its_directory(two_projects, project):
    here, there, elsewhere = two_projects
    with serve_process(project) as served:
        status, listed = get(served.base, "/api/sessions", served.token)
        assert status == 200 and [m["id"] for m in listed] == [here]
        status, full = get(served.base, f"/api/sessions/{there}", served.token)  # still readable by id
        assert status == 200 and full["meta"]["id"] == there

        client = WsAcp(served, "/ws", token=served.token)
        try:
            client.initialize()
            sessions = client.result("session/list", {})["sessions"]
            assert [s["sessionId"] for s in sessions] == [here]
            response, _ = client.call("session/load", {"sessionId": there, "cwd": str(elsewhere), "mcpServers": []})
            message = response["error"]["message"]
            assert f"'{elsewhere}' is outside the directory this server serves ('{project}'" in message
            assert f"cd {elsewhere} && openheim serve" in message
            assert "configured work_dir" not in message  # no work_dir was configured
            response, _ = client.call("session/new", {"cwd": str(elsewhere), "mcpServers": []})
            assert "is outside the directory this server serves" in response["error"]["message"]
            response, _ = client.call("session/load", {"sessionId": here, "cwd": str(project), "mcpServers": []})
            assert "result" in response, response
        finally:
            client.close()


def test_a_configured_work_dir_is_named_as_such(two_projects, project, isolated_home):
    _, there, elsewhere = two_projects
    config = isolated_home / "config.toml"
    config.write_text(f'work_dir = "{project}"\n' + config.read_text())
    with serve_process(project) as served:
        client = WsAcp(served, "/acp", token=served.token)
        try:
            client.initialize()
            response, _ = client.call("session/load", {"sessionId": there, "cwd": str(elsewhere), "mcpServers": []})
            assert f"is outside the configured work_dir '{project}'" in response["error"]["message"]
        finally:
            client.close()


def test_an_unreadable_session_is_a_json_4xx_without_a_traceback(srv, project, isolated_home):
    here = _stored_session(project, "fine")
    damaged, unreadable = _stored_session(project, "damaged"), _stored_session(project, "unreadable")
    history = isolated_home / "history"
    (history / f"{damaged}.json").write_text("{not json")
    log = history / f"{unreadable}.jsonl"
    log.unlink()
    log.mkdir()  # reading it fails as a file that cannot be read does, whoever runs the test
    with serve_process(project) as served:
        status, body = get(served.base, f"/api/sessions/{damaged}", served.token)
        assert status == 422 and body == {
            "error": "the session's stored files are damaged and cannot be read; see the server log"
        }
        status, body = get(served.base, f"/api/sessions/{unreadable}", served.token)
        assert status == 403 and "cannot be read" in body["error"]
        assert str(isolated_home) not in json.dumps(body)  # the data dir stays private
        assert get(served.base, f"/api/sessions/{here}", served.token)[0] == 200
        assert get(served.base, f"/api/sessions/{uuid.uuid4()}", served.token)[0] == 404
        _, err = served.stop()
    assert "Traceback" not in err
    assert f"session {damaged} is unreadable" in err and f"session {unreadable} cannot be read" in err


def test_the_rest_listing_of_an_in_process_server_follows_its_root(srv, project, tmp_path):
    """The same rule for an embedder's server (work_dir given to the builder)."""
    other = tmp_path / "other"
    other.mkdir()
    here = _stored_session(project, "here")
    _stored_session(other.resolve(), "there")
    with running_server(project, token=TOKEN) as server:
        status, listed = get(f"http://127.0.0.1:{server.port}", "/api/sessions", TOKEN)
        assert status == 200 and [m["id"] for m in listed] == [here]
