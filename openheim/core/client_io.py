"""Optional delegation of file I/O and shell commands to a client (an editor) that offered to do them."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from openheim.core.turn import CancelToken, TurnContext


@runtime_checkable
class ClientIo(Protocol):
    """File access through the client (its unsaved buffers win), and commands in its terminal.

    Tools fall back to the local disk and a local shell for whatever the client cannot do.
    """

    @property
    def can_read(self) -> bool: ...

    @property
    def can_write(self) -> bool: ...

    @property
    def can_run_commands(self) -> bool: ...

    def read_text_file(self, path: Path, line: int | None, limit: int | None,
                       cancel: CancelToken | None) -> str: ...

    def write_text_file(self, path: Path, content: str, cancel: CancelToken | None) -> None: ...

    def run_command(self, command: str, ctx: TurnContext, timeout: float, cap: int,
                    argv: list[str] | None = None) -> str:
        """Run ``command`` in the client's terminal; the result text, or a ToolExecutionError.

        ``argv``: the program and arguments to run instead of ``sh -c command`` (the sandbox helper)."""
        ...


def reader(client_io: ClientIo | None) -> ClientIo | None:
    """The client when it can read files for us, else None (use the local disk)."""
    return client_io if client_io is not None and client_io.can_read else None


def writer(client_io: ClientIo | None) -> ClientIo | None:
    """The client when it can write files for us, else None (use the local disk)."""
    return client_io if client_io is not None and client_io.can_write else None


def terminal(client_io: ClientIo | None) -> ClientIo | None:
    """The client when it runs commands in its own terminal, else None (use a local shell)."""
    return client_io if client_io is not None and client_io.can_run_commands else None
