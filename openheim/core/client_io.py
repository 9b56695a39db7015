"""Optional delegation of file I/O and shell commands to a client (an editor) that offered to do them."""

from __future__ import annotations

from openheim.core.turn_context import ClientIo

__all__ = ["ClientIo", "reader", "terminal", "writer"]


def reader(client_io: ClientIo | None) -> ClientIo | None:
    """The client when it can read files for us, else None (use the local disk)."""
    return client_io if client_io is not None and client_io.can_read else None


def writer(client_io: ClientIo | None) -> ClientIo | None:
    """The client when it can write files for us, else None (use the local disk)."""
    return client_io if client_io is not None and client_io.can_write else None


def terminal(client_io: ClientIo | None) -> ClientIo | None:
    """The client when it runs commands in its own terminal, else None (use a local shell)."""
    return client_io if client_io is not None and client_io.can_run_commands else None
