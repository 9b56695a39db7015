"""Who may use `openheim serve`: the token on every request and upgrade, the Host and Origin checks, CORS."""

from __future__ import annotations

import http.client
import json

import pytest
from websockets.exceptions import InvalidStatus
from ws_client import TOKEN, WsAcp, running_server

from openheim.config.loopback import is_loopback
from openheim.config.schema import ServeConfig, parse_config
from openheim.errors import ConfigError
from openheim.serve import guard
from openheim.serve.server import resolve_options


def get(server, path: str, headers: dict | None = None, method: str = "GET") -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def test_rest_needs_the_token_as_bearer_or_query(server):
    status, headers, body = get(server, "/api/config")
    assert status == 401 and headers["www-authenticate"] == "Bearer"
    assert "Authorization: Bearer TOKEN" in json.loads(body)["error"]
    assert get(server, "/api/config", {"Authorization": "Bearer wrong-token"})[0] == 401
    assert get(server, "/api/config?token=wrong")[0] == 401
    assert get(server, "/api/config", {"Authorization": f"Basic {TOKEN}"})[0] == 401
    assert get(server, "/api/config?token=")[0] == 401
    assert get(server, "/api/config", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    assert get(server, f"/api/config?token={TOKEN}")[0] == 200
    assert get(server, "/api/nothing-here")[0] == 401  # even a 404 needs the token first


def test_the_page_itself_needs_no_token_and_holds_no_data(server):
    status, headers, body = get(server, "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert TOKEN.encode() not in body


@pytest.mark.parametrize("path", ["/acp", "/ws"])
def test_websocket_upgrades_need_the_token(server, path):
    for kw in ({}, {"token": "wrong"}, {"token": "wrong", "query_token": True}):
        with pytest.raises(InvalidStatus) as refused:
            WsAcp(server, path, **kw)
        assert refused.value.response.status_code == 401
    for kw in ({"token": TOKEN}, {"token": TOKEN, "query_token": True}):
        client = WsAcp(server, path, **kw)
        try:
            assert client.initialize()["protocolVersion"] == 1
        finally:
            client.close()


def test_without_a_token_only_loopback_host_names_are_served(srv, project):
    with running_server(project) as server:
        assert get(server, "/api/models")[0] == 200
        assert get(server, "/api/models", {"Host": f"localhost:{server.port}"})[0] == 200
        status, _, body = get(server, "/api/models", {"Host": f"rebind.example:{server.port}"})
        assert status == 403 and "loopback Host" in json.loads(body)["error"]
        upgrade = {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        }
        assert get(server, "/acp", {**upgrade, "Host": "rebind.example"})[0] == 403
        assert get(server, "/acp", {**upgrade, "Host": f"127.0.0.1:{server.port}"})[0] == 101
        with pytest.raises(InvalidStatus) as refused:  # a second Host header is refused outright
            WsAcp(server, "/acp", additional_headers={"Host": "rebind.example"})
        assert refused.value.response.status_code == 400


def test_browser_upgrades_from_foreign_origins_are_refused(srv, project):
    with running_server(project, cors_origins=("https://app.example",)) as server:
        with pytest.raises(InvalidStatus) as refused:
            WsAcp(server, "/acp", origin="http://evil.example")
        assert refused.value.response.status_code == 403
        for origin in (f"http://127.0.0.1:{server.port}", "https://app.example"):
            client = WsAcp(server, "/acp", origin=origin)
            client.close()


def test_cors_answers_only_configured_origins(srv, project):
    with running_server(project, cors_origins=("https://app.example",)) as server:
        _, headers, _ = get(server, "/api/models", {"Origin": "https://app.example"})
        assert headers["access-control-allow-origin"] == "https://app.example" and headers["vary"] == "Origin"
        _, headers, _ = get(server, "/api/models", {"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in headers
        status, headers, _ = get(
            server,
            "/api/models",
            {
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "authorization",
            },
            method="OPTIONS",
        )
        assert status == 204 and headers["access-control-allow-headers"] == "Authorization"
        assert "GET" in headers["access-control-allow-methods"]
        status, headers, _ = get(server, "/api/models", {"Origin": "https://evil.example"}, method="OPTIONS")
        assert status == 204 and "access-control-allow-origin" not in headers
    with running_server(project) as server:  # default: no origin at all
        _, headers, _ = get(server, "/api/models", {"Origin": "https://app.example"})
        assert "access-control-allow-origin" not in headers


def test_methods_and_endpoints(server):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, headers, _ = get(server, "/api/config", auth, method="DELETE")
    assert status == 405 and headers["allow"] == "GET, HEAD, OPTIONS"
    status, headers, body = get(server, "/acp", auth)
    assert status == 426 and "WebSocket endpoint" in json.loads(body)["error"]
    status, headers, body = get(server, "/api/models", auth, method="HEAD")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 0
    assert get(server, "/elsewhere", auth)[0] == 404


def test_a_non_loopback_address_needs_a_token():
    config = ServeConfig()
    with pytest.raises(ConfigError, match="needs a token: set OPENHEIM_SERVE_TOKEN"):
        resolve_options(config, "0.0.0.0", None, None, environ={})
    with pytest.raises(ConfigError, match="empty"):
        resolve_options(config, "0.0.0.0", None, "  ", environ={})
    opts = resolve_options(config, "0.0.0.0", 0, None, environ={"OPENHEIM_SERVE_TOKEN": "s3cret"})
    assert (opts.host, opts.port, opts.token) == ("0.0.0.0", 0, "s3cret")
    named = ServeConfig(host="::", port=9000, token_env="MY_TOKEN", cors_origins=["https://a.example"])
    opts = resolve_options(named, None, None, None, environ={"MY_TOKEN": "t"})
    assert (opts.host, opts.port, opts.token, opts.cors_origins) == ("::", 9000, "t", ("https://a.example",))
    assert resolve_options(named, "127.0.0.1", 1, "flag", environ={"MY_TOKEN": "t"}).token == "flag"
    loopback = resolve_options(config, None, None, None, environ={})
    assert (loopback.host, loopback.port, loopback.token_generated) == ("127.0.0.1", 1217, True)
    assert len(loopback.token) >= 40 and loopback.token != resolve_options(config, None, None, None, environ={}).token
    bare = resolve_options(config, None, None, None, environ={}, no_token=True)
    assert bare.token is None and not bare.token_generated
    with pytest.raises(ConfigError, match="needs a token"):
        resolve_options(config, "0.0.0.0", None, None, environ={}, no_token=True)
    with pytest.raises(ConfigError, match="contradicts"):
        resolve_options(config, None, None, "t", environ={}, no_token=True)


def test_serve_section_is_validated():
    base = {
        "default_provider": "p",
        "providers": {"p": {"api_base": "https://x", "default_model": "m", "models": ["m"]}},
    }
    config = parse_config({**base, "serve": {"port": 8080, "cors_origins": ["https://a.example/"]}})
    assert config.serve.port == 8080 and config.serve.cors_origins == ["https://a.example"]
    assert config.serve.token_env == "OPENHEIM_SERVE_TOKEN"
    assert not config.serve.allow_client_mcp_commands and config.serve.max_message_bytes == 8 * 1024 * 1024
    tuned = parse_config(
        {**base, "serve": {"allow_client_mcp_commands": True, "max_message_bytes": 65536, "max_file_bytes": 1 << 20}}
    ).serve
    assert (tuned.allow_client_mcp_commands, tuned.max_message_bytes, tuned.max_file_bytes) == (True, 65536, 1 << 20)
    options = resolve_options(tuned, None, 0, "t", environ={})
    assert (options.allow_client_mcp_commands, options.max_message_bytes, options.max_frame_bytes) == (
        True,
        65536,
        (1 << 20) + 64 * 1024,
    )
    for bad, message in (
        ({"port": 70000}, "at most 65535"),
        ({"cors_origins": ["*"]}, "no wildcard"),
        ({"cors_origins": ["https://a.example/path"]}, "must be an origin"),
        ({"host": 1}, "must be a string"),
        ({"max_message_bytes": 10}, "at least 1024"),
        ({"allow_client_mcp_commands": "yes"}, "true or false"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse_config({**base, "serve": bad})


def test_guard_pieces():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com", ""))
    assert guard.host_name("[::1]:1217") == "::1" and guard.host_name("localhost:80") == "localhost"
    assert not guard.host_ok(None) and not guard.host_ok("localhost.evil.example")
    assert guard.given_token({"Authorization": "bearer  abc "}, "") == "abc"
    assert guard.given_token({}, "a=1&token=q") == "q"
    assert guard.token_ok(None, {}, "") and not guard.token_ok("x", {}, "token=y")
    assert guard.token_ok("ünïcode", {}, "token=%C3%BCn%C3%AFcode")
