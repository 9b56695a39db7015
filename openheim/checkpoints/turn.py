"""One turn's checkpoint: taken just before the first tool that may change files runs, compared after the turn."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openheim.checkpoints.snapshot import Snapshot
    from openheim.checkpoints.store import CheckpointStore, TurnRecord
    from openheim.config.long_sessions import CheckpointConfig
    from openheim.core.models import Tool
    from openheim.core.tools import ToolCapabilities, ToolExecutor, ToolView, ViewContext
    from openheim.core.turn_context import TurnContext

log = logging.getLogger(__name__)

NEVER_CHANGE_FILES = frozenset({"delegate_task"})  # a subagent's own tools are wrapped themselves
CHANGING_KINDS = frozenset({"edit", "delete", "move", "execute", "other"})


def may_change_files(name: str, capabilities: ToolCapabilities) -> bool:
    """Whether a call of this tool could change files: anything not read-only, except thinking and delegating."""
    return not capabilities.read_only and capabilities.kind in CHANGING_KINDS and name not in NEVER_CHANGE_FILES


class TurnCheckpoint:
    """The checkpoint of one turn; thread-safe (a reply's tool calls may run in parallel)."""

    def __init__(
        self,
        store: CheckpointStore | Callable[[], CheckpointStore],
        settings: CheckpointConfig,
        session_id: str,
        root: str,
        at: int,
        skip: frozenset[str] = frozenset(),
        too_big: set[str] | None = None,
    ) -> None:
        """``store``, or what opens it when the first snapshot is taken (a turn that changes no file never does)."""
        self._store, self.settings = store, settings
        self.too_big = too_big if too_big is not None else set()  # roots over max_files: not scanned again
        self.session_id, self.root, self.at, self.skip = session_id, root, at, skip
        self.snapshot: Snapshot | None = None
        self.attempted = False
        self._lock = threading.Lock()

    @property
    def store(self) -> CheckpointStore:
        if callable(self._store):
            self._store = self._store()
        return self._store

    def ensure(self) -> None:
        """Take the checkpoint, once; a failure is logged and the turn goes on without one."""
        with self._lock:
            if self.attempted:
                return
            self.attempted = True
            if self.root in self.too_big:
                return
            from openheim.checkpoints.scan import TooManyFiles  # a turn that changes no file never loads these
            from openheim.checkpoints.snapshot import take

            try:
                self.snapshot = take(
                    self.store, self.root, self.settings.max_file_bytes, self.settings.max_files, self.skip
                )
            except TooManyFiles:
                self.too_big.add(self.root)
                log.warning(
                    "no checkpoint of %s: it holds more than %d files ([checkpoints] max_files); this "
                    "turn cannot be undone",
                    self.root,
                    self.settings.max_files,
                )
            except OSError as e:
                log.warning("no checkpoint of %s (%s); this turn cannot be undone", self.root, e)

    def finish(self) -> TurnRecord | None:
        """Record what the turn changed (None when it took no checkpoint or changed nothing)."""
        snapshot = self.snapshot
        if snapshot is None:
            return None
        from openheim.checkpoints.scan import TooManyFiles
        from openheim.checkpoints.snapshot import changes_since

        try:
            changes = changes_since(snapshot, self.settings.max_file_bytes, self.settings.max_files, self.skip)
        except (TooManyFiles, OSError) as e:
            log.warning("could not compare %s with its checkpoint (%s)", self.root, e)
            return None
        if not changes:
            return None
        from openheim.checkpoints.store import TurnRecord

        record = TurnRecord(
            len(self.store.turns(self.session_id)) + 1, self.at, self.root, snapshot.checkpoint, changes
        )
        try:
            self.store.append_record(self.session_id, record.to_dict())
        except OSError as e:  # the turn itself went well: it only cannot be undone
            log.warning("could not record the files this turn changed (%s); it cannot be undone", e)
            return None
        return record

    def wrap(self, inner: ToolExecutor) -> ToolExecutor:
        return CheckpointingExecutor(inner, self)


class CheckpointingExecutor:
    """``inner``, with the turn's checkpoint taken before the first call that may change files."""

    def __init__(self, inner: ToolExecutor, checkpoint: TurnCheckpoint) -> None:
        self.inner, self.checkpoint = inner, checkpoint

    def names(self) -> list[str]:
        return self.inner.names()

    def definitions(self) -> list[Tool]:
        return self.inner.definitions()

    def capabilities(self, name: str) -> ToolCapabilities:
        return self.inner.capabilities(name)

    def execute(self, name: str, arguments: str, ctx: TurnContext) -> str:
        if may_change_files(name, self.inner.capabilities(name)):
            self.checkpoint.ensure()
        return self.inner.execute(name, arguments, ctx)

    def present(self, name: str, args: dict | None, where: ViewContext) -> ToolView:
        return self.inner.present(name, args, where)

    def __len__(self) -> int:
        return len(self.inner.names())

    def __contains__(self, name: object) -> bool:
        return name in self.inner.names()
