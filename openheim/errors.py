"""The exception family raised by core code, and how any error is told to a person: one line and an exit code
(the front ends print them; only they decide to)."""

from __future__ import annotations

import errno


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
    """Connecting or reading failed (timeout, refused, reset); retryable, unless the host name does not
    resolve (a typo in api_base will not fix itself in seconds)."""

    prefix = "Request error: "

    def __init__(self, message: str = "", retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


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


class ReplayMismatch(ConfigError):
    """A replayed run asked for something its recording does not hold (a changed request, or one too many)."""

    prefix = "Replay: "


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


class TooManySessions(OpenheimError):
    """Every live session is running a turn or held by a connected client, and the map is full."""

    def __init__(self, capacity: int) -> None:
        super().__init__(
            f"too many live sessions ({capacity}, each running a turn or open in a connected client); "
            "close sessions you no longer use (session/close) or try again later"
        )
        self.capacity = capacity


class HistoryDiverged(OpenheimError):
    """The on-disk log is no longer a prefix of the in-memory conversation."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"conversation {session_id} was modified by another process since it was loaded")
        self.session_id = session_id


class PromptBlocked(OpenheimError):
    """A user_prompt hook refused the prompt; the turn did not run."""

    prefix = "Prompt blocked by a hook: "


class FileAccessError(OpenheimError):
    """Reading or writing a file failed: permissions, a full disk, a file where a directory should be, ..."""


_OS_HINTS = {
    errno.EACCES: "check its owner and permissions",
    errno.EPERM: "check its owner and permissions",
    errno.EROFS: "the file system is read-only; set OPENHEIM_HOME or data_dir to a writable directory",
    errno.ENOSPC: "free some disk space and try again",
    errno.EDQUOT: "free some disk space and try again",
    errno.ENOTDIR: "a file is in the way where a directory should be",
    errno.EEXIST: "a file is in the way where a directory should be",
    errno.EINVAL: "the file system or the sandbox refused it: a name it does not accept, or a write it does not allow",
    errno.ELOOP: "a symbolic link is on the way, which openheim never writes through",
}


def file_error(error: OSError, action: str = "access", path: object = None) -> FileAccessError:
    """An OSError as one line, git-style: what could not be done, where, why, and what to do about it.

    ``path`` names the file when the error does not (a failed write on an open descriptor).
    """
    where = path if path is not None else error.filename
    why = error.strerror or str(error) or type(error).__name__
    text = f"could not {action} {where}: {why}" if where is not None else f"could not {action}: {why}"
    hint = _OS_HINTS.get(error.errno) if error.errno is not None else None
    return FileAccessError(f"{text} ({hint})" if hint else text)


class DatabaseError(OpenheimError):
    prefix = "Database error: "


class Cancelled(OpenheimError):
    """The turn was cancelled; raised out of blocking calls that the cancel token interrupted."""

    def __init__(self, message: str = "cancelled") -> None:
        super().__init__(message)


class Unavailable(OpenheimError):
    """The runtime could not be built (no config, no API key, ...); ``cause`` says why and what to do."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


# --- how an error is reported: one line and the documented exit code -------------------------------------


def exit_code_for(error: BaseException) -> int:
    """The documented exit code of an error: 2 for usage and configuration, 130 for Ctrl-C, 1 for the rest."""
    import click

    if isinstance(error, click.ClickException):
        return error.exit_code
    if isinstance(error, KeyboardInterrupt):
        return 130
    return 2 if isinstance(error, (ConfigError, InvalidArgument)) else 1


def error_message(error: BaseException) -> str:
    """The one line any error is reported as (after "Error: "): what went wrong and what to do."""
    import click

    if isinstance(error, click.ClickException):
        return error.format_message()
    if isinstance(error, OpenheimError):
        return describe(error)
    if isinstance(error, OSError):  # a file we could not read or write: what, where and why
        return describe(file_error(error))
    return f"internal error: {type(error).__name__}: {error} (run with OPENHEIM_LOG=debug for details)"


def error_kind(error: BaseException) -> str:
    """A stable snake_case name for scripts: ``config_error``, ``http_error``, ``session_locked``, ..."""
    import re

    import click

    if isinstance(error, click.UsageError):
        return "usage_error"
    if isinstance(error, OSError):
        return "file_access_error"
    if not isinstance(error, OpenheimError):
        return "internal_error"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(error).__name__).lower()


_HTTP_HINTS = {
    400: "the provider rejected the request; its reason is above",
    401: "check the provider's API key",
    402: "check the account's billing or credits",
    403: "check the provider's API key and what it is allowed to use",
    404: "check the model name and api_base",
    408: "the provider timed out; try again",
    413: "the request is too large for the provider",
    422: "the provider rejected the request; its reason is above",
    429: "rate limited or out of quota; wait and try again, or check the account's limits",
}


def describe(error: BaseException) -> str:
    """One line: what went wrong and, where we know it, what to do next."""
    text = " ".join(str(error).split())
    if len(text) > 400:
        text = text[:399] + "…"
    if isinstance(error, HttpError):
        hint = _HTTP_HINTS.get(error.status)
        if hint is None and error.status >= 500:
            hint = "the provider's server failed; try again later, or check the server if it is your own"
        if hint:
            text += f" ({hint})"
    return text


# The exit codes of `openheim` and `openheim run`, as their --help shows them.
EXIT_CODE_HELP = """\b
Exit codes:
  0    the model finished (end_turn; also no_content, with a notice)
  1    runtime or provider error (also: session locked or busy)
  2    usage or configuration error (also: a replay that differs from its recording)
  3    stopped at max_iterations
  4    reply cut off at max_tokens
  5    the model refused
  6    stopped at a budget (--max-tokens-total, --timeout, --max-cost)
  7    the answer did not match --output-schema (after one repair round)
  8    a tool call was denied and --fail-on-deny was given
  130  interrupted (Ctrl-C); SIGTERM/SIGHUP exit with 128+signal
  141  stdout was closed early (a broken pipe, e.g. `| head`); nothing is printed
"""
BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a program a closed pipe ended
DENIED = 8  # `run --fail-on-deny` when a tool call was denied
