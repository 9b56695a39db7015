"""The OpenAPI 3.1 document of `openheim serve`'s REST API, served at /api/openapi.json."""

from __future__ import annotations

from typing import Any

from openheim.version import __version__


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


STRINGS = {"type": "array", "items": {"type": "string"}}
UNAUTHORIZED = _json(_ref("Error"), "Missing or wrong token (only when the server has one)")

SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
    "PublicConfig": {
        "type": "object",
        "required": [
            "default_provider",
            "max_iterations",
            "work_dir",
            "allow_shell",
            "tui",
            "providers",
            "mcp_servers",
        ],
        "properties": {
            "default_provider": {"type": "string"},
            "max_iterations": {"type": "integer"},
            "work_dir": {"type": "string", "description": "The sandbox root of file tools and the fs channel"},
            "allow_shell": {"type": "boolean"},
            "tui": {"type": "object", "properties": {"theme_color": {"type": "string"}}},
            "providers": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["kind", "api_base", "default_model", "models"],
                    "properties": {
                        "kind": {"type": "string"},
                        "api_base": {"type": "string"},
                        "default_model": {"type": "string"},
                        "models": STRINGS,
                        "env_var": {"type": "string"},
                        "timeout_secs": {"type": "integer"},
                        "max_tokens": {"type": "integer"},
                        "context_window": {"type": "integer"},
                    },
                },
            },
            "mcp_servers": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {
                        "command": {"type": "string"},
                        "url": {"type": "string"},
                        "env": {"type": "object", "additionalProperties": {"const": "<redacted>"}},
                        "headers": {"type": "object", "additionalProperties": {"const": "<redacted>"}},
                        "tool_timeout_secs": {"type": "integer"},
                    },
                },
            },
            "memory": {
                "type": "object",
                "properties": {
                    "embedding_provider": {"type": "string"},
                    "embedding_model": {"type": "string"},
                    "top_k": {"type": "integer"},
                },
            },
        },
    },
    "Models": {
        "type": "object",
        "required": ["default_provider", "providers"],
        "properties": {
            "default_provider": {"type": "string"},
            "providers": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "required": ["default_model", "models"],
                    "properties": {"default_model": {"type": "string"}, "models": STRINGS},
                },
            },
        },
    },
    "Tool": {
        "type": "object",
        "required": ["name", "description", "parameters", "read_only"],
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "parameters": {"type": "object", "description": "JSON Schema of the arguments"},
            "read_only": {"type": "boolean"},
        },
    },
    "McpServerStatus": {
        "type": "object",
        "required": ["name", "transport", "source", "state", "connected", "tool_count", "tools"],
        "properties": {
            "name": {"type": "string"},
            "transport": {"enum": ["stdio", "http", "unknown"]},
            "source": {"enum": ["config", "mcp-config", "project", "session"]},
            "state": {"enum": ["starting", "connected", "disconnected", "failed", "closed", "untrusted"]},
            "connected": {"type": "boolean"},
            "tool_count": {"type": "integer"},
            "error": {"type": "string"},
            "command": {"type": "string"},
            "url": {"type": "string"},
            "tools": STRINGS,
        },
    },
    "SessionMeta": {
        "type": "object",
        "required": ["id", "created_at", "updated_at", "skills", "mode"],
        "properties": {
            "id": {"type": "string"},
            "created_at": {"type": "string"},
            "updated_at": {"type": "string"},
            "model": {"type": "string"},
            "provider": {"type": "string"},
            "title": {"type": "string"},
            "skills": STRINGS,
            "cwd": {"type": "string"},
            "context_usage": {"type": "object"},
            "mode": {"type": "string"},
        },
    },
    "Session": {
        "type": "object",
        "required": ["meta", "messages"],
        "properties": {
            "meta": _ref("SessionMeta"),
            "messages": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["role"],
                    "description": "A stored message: role and content blocks, as in the history log",
                    "properties": {"role": {"type": "string"}},
                },
            },
        },
    },
}


def _get(operation_id: str, summary: str, ok: dict, extra: dict | None = None, parameters: list | None = None) -> dict:
    operation: dict = {
        "operationId": operation_id,
        "summary": summary,
        "responses": {"200": ok, "401": UNAUTHORIZED, **(extra or {})},
    }
    if parameters:
        operation["parameters"] = parameters
    return {"get": operation}


def document() -> dict:
    """The API description (a new dict each call)."""
    session_id = {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "A session id (a UUID)",
        "schema": {"type": "string", "format": "uuid"},
    }
    sessions = _json({"type": "array", "items": _ref("SessionMeta")}, "Session metadata")
    sessions["links"] = {
        "GetSession": {
            "operationId": "getSession",
            "parameters": {"id": "$response.body#/0/id"},
            "description": "The newest session in full",
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "openheim serve",
            "version": __version__,
            "description": (
                "Read-only REST API of `openheim serve`. The agent itself is reached over WebSocket: "
                "`/acp` carries bare ACP JSON-RPC messages, one per frame; `/ws` carries "
                "`{channel, data}` envelopes for the `agent` (ACP) and `fs` channels. When the server "
                "has a token, every request but `GET /` needs it, as `Authorization: Bearer TOKEN` "
                "or `?token=TOKEN`."
            ),
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "query": {"type": "apiKey", "in": "query", "name": "token"},
            },
            "schemas": SCHEMAS,
        },
        "security": [{"bearer": []}, {"query": []}],
        "paths": {
            "/": {
                "get": {
                    "operationId": "getPage",
                    "summary": "The web page (chat over /acp)",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "A self-contained HTML page",
                            "content": {"text/html": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
            "/api/config": _get(
                "getConfig", "The configuration, secrets redacted", _json(_ref("PublicConfig"), "Public view")
            ),
            "/api/models": _get("getModels", "Providers and their models", _json(_ref("Models"), "Models")),
            "/api/skills": _get("getSkills", "Installed skill names, sorted", _json(STRINGS, "Skill names")),
            "/api/tools": _get(
                "getTools",
                "Tools offered to the model",
                _json({"type": "array", "items": _ref("Tool")}, "Tool definitions"),
            ),
            "/api/mcp-servers": _get(
                "getMcpServers",
                "Configured MCP servers and their status",
                _json({"type": "array", "items": _ref("McpServerStatus")}, "Statuses"),
            ),
            "/api/sessions": _get(
                "listSessions",
                "Stored sessions, newest first",
                sessions,
                {"500": _json(_ref("Error"), "The history could not be read")},
            ),
            "/api/sessions/{id}": _get(
                "getSession",
                "One stored session: metadata and messages",
                _json(_ref("Session"), "The session"),
                {
                    "400": _json(_ref("Error"), "Not a session id"),
                    "404": _json(_ref("Error"), "No such session"),
                    "500": _json(_ref("Error"), "The session could not be read"),
                },
                [session_id],
            ),
            "/api/openapi.json": _get("getOpenApi", "This document", _json({"type": "object"}, "OpenAPI 3.1 document")),
        },
    }
