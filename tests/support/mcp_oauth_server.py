"""An OAuth-protected MCP server (the SDK's server-side auth) on 127.0.0.1 for the sign-in tests.

    python tests/support/mcp_oauth_server.py [--token-lifetime SECONDS]   # prints "PORT <n>" first

It is its own authorization server: dynamic client registration, and an /authorize that approves at
once (the "user" agrees) by redirecting to the client's redirect_uri with a code. Access tokens live
``--token-lifetime`` seconds; refresh tokens rotate. Tool: ``whoami`` (the client id of the token).
"""

from __future__ import annotations

import argparse
import secrets
import socket
import time
import warnings

from mcp.server import MCPServer
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import Context
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


class AutoApprove:
    """An in-memory authorization server whose user always agrees."""

    def __init__(self, lifetime: int) -> None:
        self.lifetime = lifetime
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id or ""] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            resource=params.resource,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = "at-" + secrets.token_urlsafe(16), "rt-" + secrets.token_urlsafe(16)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            resource=resource,
            expires_at=int(time.time()) + self.lifetime,
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        return OAuthToken(
            access_token=access, expires_in=self.lifetime, refresh_token=refresh, scope=" ".join(scopes) or None
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(client.client_id or "", authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        print("REFRESHED", flush=True)
        return self._issue(client.client_id or "", scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


def main() -> None:
    import anyio
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--token-lifetime", type=int, default=3600)
    opts = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auth = AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            validate_token_resource=False,
            client_registration_options=ClientRegistrationOptions(enabled=True),
        )
    server = MCPServer("guarded", auth_server_provider=AutoApprove(opts.token_lifetime), auth=auth)

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Who the token belongs to."""
        return "signed in"

    print(f"PORT {port}", flush=True)
    app = server.streamable_http_app(host="127.0.0.1")
    anyio.run(lambda: uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
