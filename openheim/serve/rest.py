"""The read-only REST API of `openheim serve`: a request path in, (HTTP status, JSON body) out."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote

from openheim.errors import FileAccessError, InvalidArgument, NotFound, ParseError
from openheim.serve.openapi import document

if TYPE_CHECKING:
    from openheim.client import OpenheimClient
    from openheim.serve.ownership import ConnectionClient

log = logging.getLogger(__name__)

Route = Callable[["OpenheimClient"], Any]


def _config(client: OpenheimClient) -> dict:
    return client.public_config()


def _models(client: OpenheimClient) -> dict:
    config = client.config
    return {
        "default_provider": config.default_provider,
        "providers": {
            name: {"default_model": p.default_model, "models": list(p.models)} for name, p in config.providers.items()
        },
    }


def _skills(client: OpenheimClient) -> list[str]:
    try:
        return sorted(s.name for s in client.skills())
    except Exception as e:  # a broken skills folder is not the API's failure
        log.warning("could not list skills: %s", e)
        return []


def _tools(client: OpenheimClient) -> list[dict]:
    return [
        {
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            "read_only": client.tool_capabilities(t.name).read_only,
        }
        for t in client.tools()
    ]


def _sessions(client: OpenheimClient) -> list[dict]:
    """The stored sessions this server can open (the server passes its ConnectionClient: those of its directory)."""
    return [meta.to_dict() for meta in client.list_sessions()]


def _openapi(client: OpenheimClient) -> dict:
    return document()


ROUTES: dict[str, Route] = {
    "/api/config": _config,
    "/api/models": _models,
    "/api/skills": _skills,
    "/api/tools": _tools,
    "/api/mcp-servers": lambda client: [status.to_dict() for status in client.mcp_servers()],
    "/api/sessions": _sessions,
    "/api/openapi.json": _openapi,
}
SESSION_PREFIX = "/api/sessions/"
FAILURES = {"/api/sessions": "failed to load conversations"}


def is_api(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


def known(path: str) -> bool:
    """Whether ``path`` names an endpoint (for 404 versus 405)."""
    return path in ROUTES or (path.startswith(SESSION_PREFIX) and "/" not in path[len(SESSION_PREFIX) :])


def handle(client: OpenheimClient | ConnectionClient, path: str) -> tuple[int, Any]:
    """Answer a GET of ``path`` (already stripped of its query)."""
    route = ROUTES.get(path)
    try:
        if route is not None:
            return 200, route(cast("OpenheimClient", client))
        if known(path):
            return _session(client, unquote(path[len(SESSION_PREFIX) :]))
    except Exception:
        log.exception("GET %s failed", path)
        return 500, {"error": FAILURES.get(path, f"failed to answer {path}")}
    return 404, {"error": f"no such endpoint: {path}; see /api/openapi.json"}


def _session(client: OpenheimClient | ConnectionClient, session_id: str) -> tuple[int, Any]:
    """A stored session; one that cannot be read is the client's 4xx in one line (the file's path and the
    reason go to the server log only: clients never see the data dir)."""
    try:
        meta, messages = client.stored_session(session_id)
    except InvalidArgument:
        return 400, {"error": "invalid session id"}
    except NotFound:
        return 404, {"error": "session not found"}
    except ParseError as e:
        log.warning("session %s is unreadable: %s", session_id, e)
        return 422, {"error": "the session's stored files are damaged and cannot be read; see the server log"}
    except FileAccessError as e:
        log.warning("session %s cannot be read: %s", session_id, e)
        return 403, {"error": "the session's stored files cannot be read (permissions?); see the server log"}
    except Exception:
        log.exception("loading session %s failed", session_id)
        return 500, {"error": "failed to load session"}
    return 200, {"meta": meta.to_dict(), "messages": [m.to_dict() for m in messages]}
