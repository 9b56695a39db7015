"""Long sessions for the runtime: a compactor and a checkpoint per turn, manual compaction, undo and fork."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.conversation.compaction import Compactor

if TYPE_CHECKING:
    from openheim.checkpoints.store import CheckpointStore, TurnRecord
    from openheim.checkpoints.turn import TurnCheckpoint
    from openheim.checkpoints.undo import UndoPlan, UndoResult
    from openheim.config.agent_config import AgentConfig
    from openheim.config.schema import Config
    from openheim.conversation.compaction import Compactor
    from openheim.conversation.history import Conversation, HistoryManager
    from openheim.core.llm.base import LlmClient

log = logging.getLogger(__name__)

ResolveModel = Callable[[str | None, str | None], "AgentConfig"]


class LongSessions:
    """What the runtime needs from compaction and checkpoints, behind one object."""

    def __init__(self, config: Config, data_dir: Path, history: HistoryManager) -> None:
        self.config, self.data_dir, self.history = config, data_dir, history
        self._store: CheckpointStore | None = None
        self._opening = threading.Lock()
        self._pruned = False
        self._too_big: set[str] = set()  # roots with more than max_files files, seen by this process

    # --- compaction -----------------------------------------------------------------

    def compactor(
        self, cfg: AgentConfig, conv: Conversation, resolve: ResolveModel, llm_for: Callable[[AgentConfig], LlmClient]
    ) -> Compactor:
        """The compactor of a turn on ``conv``: the session's model, or ``compaction_model``, writes summaries."""

        settings = self.config.compaction
        summary_cfg = self._summary_model(cfg, resolve)
        latest = conv.compactions[-1] if conv.compactions else None
        return Compactor(settings, cfg.context_window, lambda: llm_for(summary_cfg), summary_cfg.model, latest)

    def _summary_model(self, cfg: AgentConfig, resolve: ResolveModel) -> AgentConfig:
        name = self.config.compaction.compaction_model
        if not name:
            return cfg
        provider, _, model = name.partition("/")
        if model and provider in self.config.providers:
            return resolve(provider, model)
        return resolve(cfg.provider_name, name)

    # --- checkpoints and undo -----------------------------------------------------------

    @property
    def store(self) -> CheckpointStore:
        """The checkpoint store, opened on first use: a turn that changes no file never needs it."""
        with self._opening:
            if self._store is None:
                from openheim.checkpoints.store import CheckpointStore

                self._store = CheckpointStore(self.data_dir / "checkpoints")
            return self._store

    def _store_for_snapshot(self) -> CheckpointStore:
        """The store, old checkpoints pruned first (once per process, when the first snapshot is taken)."""
        self._prune_once()
        return self.store

    def checkpoint(self, session_id: str, root: Path, at: int = 0) -> TurnCheckpoint | None:
        """The turn's checkpoint (taken lazily, before the first tool that may change files), or None when off."""
        from openheim.checkpoints.turn import TurnCheckpoint

        settings = self.config.checkpoints
        if not settings.enabled:
            return None
        return TurnCheckpoint(
            self._store_for_snapshot,
            settings,
            session_id,
            str(root),
            at,
            frozenset({str(self.data_dir)}),
            self._too_big,
        )

    def turns(self, session_id: str) -> list[TurnRecord]:
        return self.store.turns(session_id)

    def plan_undo(self, session_id: str, turns: int = 1) -> UndoPlan:
        from openheim.checkpoints.undo import plan_undo

        return plan_undo(self.store, session_id, turns)

    def apply_undo(self, plan: UndoPlan, force: bool = False) -> UndoResult:
        from openheim.checkpoints.undo import apply_undo

        return apply_undo(self.store, plan, force)

    def fork_checkpoints(self, source: str, target: str) -> None:
        self.store.copy_session(source, target)

    def _prune_once(self) -> None:
        if self._pruned:
            return
        self._pruned = True
        from openheim.checkpoints.prune import prune

        settings = self.config.checkpoints
        try:
            prune(self.store, settings.max_age_days, settings.max_store_mb)
        except OSError as e:
            log.warning("could not prune old checkpoints in %s: %s", self.store.dir, e)
