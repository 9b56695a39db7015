"""Optional delegation of file I/O to an ACP client that offered to read and write files for us."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from openheim.core.turn import CancelToken


@runtime_checkable
class ClientIo(Protocol):
    """File access through the client (its unsaved buffers win); tools fall back to disk when it can't."""

    @property
    def can_read(self) -> bool: ...

    @property
    def can_write(self) -> bool: ...

    def read_text_file(self, path: Path, line: int | None, limit: int | None,
                       cancel: CancelToken | None) -> str: ...

    def write_text_file(self, path: Path, content: str, cancel: CancelToken | None) -> None: ...


def reader(client_io: ClientIo | None) -> ClientIo | None:
    """The client when it can read files for us, else None (use the local disk)."""
    return client_io if client_io is not None and getattr(client_io, "can_read", False) else None


def writer(client_io: ClientIo | None) -> ClientIo | None:
    """The client when it can write files for us, else None (use the local disk)."""
    return client_io if client_io is not None and getattr(client_io, "can_write", False) else None
