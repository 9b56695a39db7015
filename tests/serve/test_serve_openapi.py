"""The REST API against its own OpenAPI document: a property-based run (schemathesis) finds no failure."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from ws_client import TOKEN, WsAcp

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def test_schemathesis_finds_no_failure(server, srv, project, tmp_path):
    client = WsAcp(server, "/acp", token=TOKEN)  # one stored session, so /api/sessions/{id} has a real id to find
    try:
        client.initialize()
        client.prompt(client.new_session(project), "something to list")
    finally:
        client.close()
    base = f"http://127.0.0.1:{server.port}"
    r = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{base}/api/openapi.json?token={TOKEN}",
            "--checks",
            "all",
            "-H",
            f"Authorization: Bearer {TOKEN}",
            "--max-examples",
            "15",
            "--seed",
            "1217",
            "--generation-database",
            "none",
            "--no-color",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout.split("SUMMARY")[-1].lower()


def test_the_document_names_every_endpoint(server):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/openapi.json?token={TOKEN}") as r:
        doc = json.load(r)
    assert doc["openapi"] == "3.1.0"
    assert set(doc["paths"]) == {
        "/",
        "/api/config",
        "/api/models",
        "/api/skills",
        "/api/tools",
        "/api/mcp-servers",
        "/api/sessions",
        "/api/sessions/{id}",
        "/api/openapi.json",
    }
    assert set(doc["components"]["securitySchemes"]) == {"bearer", "query"}
