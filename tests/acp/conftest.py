"""Fixtures of the ACP tests: a fake model (shell allowed), a raw-wire agent, a project directory."""

from __future__ import annotations

import pytest
from acp_wire import AcpWire
from cli_helpers import write_config
from fake_llm import FakeLLMServer


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url, extra="allow_shell = true")
        yield server


@pytest.fixture
def wire(srv):
    agent = AcpWire()
    yield agent
    agent.close()


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    return root.resolve()
