"""ACP constants and mappings kept in one place: error codes, stop reasons, modes."""

from __future__ import annotations

from typing import Any

from openheim.core.models import StopReason
from openheim.errors import (
    ConfigError,
    InvalidArgument,
    NotFound,
    OpenheimError,
    SessionBusy,
    SessionLocked,
    TooManySessions,
    Unavailable,
    file_error,
)

PROTOCOL_VERSION = 1

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002

MODES = (
    ("code", "Code", "Full tool access; side effects ask for permission"),
    ("architect", "Architect", "Read-only: inspect the code and plan, without changing anything"),
)

STOP_REASONS = {
    StopReason.END_TURN: "end_turn",
    StopReason.NO_CONTENT: "end_turn",
    StopReason.MAX_ITERATIONS: "max_turn_requests",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.REFUSAL: "refusal",
    StopReason.CANCELLED: "cancelled",
    StopReason.BUDGET: "max_turn_requests",  # ACP has no budget reason; the closest: the turn hit a limit
    StopReason.INVALID_OUTPUT: "end_turn",  # ACP prompts carry no output schema
}


class RpcError(Exception):
    """A JSON-RPC error answer: code, one-line message and optional data."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def to_dict(self) -> dict:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def invalid_params(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, message)


def error_for(exc: BaseException) -> RpcError:
    """The JSON-RPC error an exception becomes (the one place errors are mapped)."""

    if isinstance(exc, RpcError):
        return exc
    if isinstance(exc, Unavailable):  # the runtime could not be built: say what to set up
        return RpcError(INTERNAL_ERROR, str(exc), {"kind": "not_configured"})
    if isinstance(exc, NotFound):
        return RpcError(RESOURCE_NOT_FOUND, str(exc), str(exc))
    if isinstance(exc, (InvalidArgument, ConfigError)):
        return RpcError(INVALID_PARAMS, str(exc))
    if isinstance(exc, TooManySessions):
        return RpcError(INTERNAL_ERROR, str(exc), {"kind": "too_many_sessions", "capacity": exc.capacity})
    if isinstance(exc, SessionBusy):
        return RpcError(INTERNAL_ERROR, str(exc), {"kind": "session_busy", "session_id": exc.session_id})
    if isinstance(exc, SessionLocked):
        return RpcError(
            INTERNAL_ERROR,
            str(exc),
            {"kind": "session_locked", "session_id": exc.session_id, "pid": exc.pid, "host": exc.host},
        )
    if isinstance(exc, OpenheimError):
        return RpcError(INTERNAL_ERROR, str(exc))
    if isinstance(exc, OSError):
        return RpcError(INTERNAL_ERROR, str(file_error(exc)))
    return RpcError(INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")


def stop_reason(reason: StopReason) -> str:
    return STOP_REASONS.get(reason, "end_turn")


# --- params ------------------------------------------------------------------


def require_str(params: dict, key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise invalid_params(f"'{key}' is required and must be a non-empty string")
    return value


def optional_str(params: dict, key: str) -> str | None:
    value = params.get(key)
    if value is not None and not isinstance(value, str):
        raise invalid_params(f"'{key}' must be a string")
    return value


def require_list(params: dict, key: str) -> list:
    value = params.get(key)
    if not isinstance(value, list):
        raise invalid_params(f"'{key}' is required and must be an array")
    return value


def meta_of(params: dict) -> dict:
    meta = params.get("_meta")
    return meta if isinstance(meta, dict) else {}
