"""Fixtures of the `openheim serve` tests: a fake model, a project directory, a server with a token."""

from __future__ import annotations

import pytest
from cli_helpers import write_config
from fake_llm import FakeLLMServer
from ws_client import TOKEN, WsAcp, running_server


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def server(srv, project):
    with running_server(project, token=TOKEN, watch_interval=0.1) as running:
        yield running


@pytest.fixture
def acp(server):
    client = WsAcp(server, "/acp", token=TOKEN)
    yield client
    client.close()


@pytest.fixture
def ws(server):
    client = WsAcp(server, "/ws", token=TOKEN)
    yield client
    client.close()
