"""The exception family raised by core code; only cli.py and the ACP layer turn these into user output."""
from __future__ import annotations


class OpenheimError(Exception):
    """Base of every error openheim raises on purpose."""

    prefix = ""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.prefix}{self.message}"


class ApiError(OpenheimError):
    """The provider answered with an error inside an otherwise successful response."""

    prefix = "API error: "

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class HttpError(OpenheimError):
    """A provider answered with a non-2xx status."""

    def __init__(self, status: int, body: str, retry_after: float | None = None, message: str | None = None) -> None:
        super().__init__(body if message is None else message)  # message: the provider's own words
        self.status = status
        self.body = body
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.message}"


class ContextOverflow(OpenheimError):
    """The request was too long for the model's context window; never retried."""

    prefix = "Context window exceeded: "


class IncompleteResponse(OpenheimError):
    """The stream ended before the provider's end marker; retryable."""

    prefix = "Incomplete response: "


class TransportError(OpenheimError):
    """Connecting or reading failed (timeout, refused, reset); retryable."""

    prefix = "Request error: "


class ToolExecutionError(OpenheimError):
    """A tool failed; the agent loop feeds this back to the model as an error result."""

    prefix = "Tool execution error: "


class ParseError(OpenheimError):
    prefix = "Parse error: "


class InvalidArgument(OpenheimError):
    """A caller mistake (maps to ACP invalid_params)."""

    prefix = "Invalid argument: "


class ConfigError(OpenheimError):
    prefix = "Config error: "


class NotFound(OpenheimError):
    """Something named by the caller does not exist."""


class SessionLocked(OpenheimError):
    """Another process holds the session's lease."""

    def __init__(self, session_id: str, pid: int, host: str) -> None:
        super().__init__(f"session {session_id} is active in another process (pid {pid} on {host})")
        self.session_id, self.pid, self.host = session_id, pid, host


class SessionBusy(OpenheimError):
    """A prompt is already running on this session in this process."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"a prompt is already in flight for session {session_id}; retry once it completes")
        self.session_id = session_id


class HistoryDiverged(OpenheimError):
    """The on-disk log is no longer a prefix of the in-memory conversation."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"conversation {session_id} was modified by another process since it was loaded")
        self.session_id = session_id


class DatabaseError(OpenheimError):
    prefix = "Database error: "


class Cancelled(OpenheimError):
    """The turn was cancelled; raised out of blocking calls that the cancel token interrupted."""

    def __init__(self, message: str = "cancelled") -> None:
        super().__init__(message)
