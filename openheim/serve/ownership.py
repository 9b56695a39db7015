"""Whose live session is it: `openheim serve` gives each connection its own door to the runtime.

A live session belongs to the connection that opened or loaded it. Every ACP connection of the server
talks to the runtime through a ``ConnectionClient``: the ``OpenheimClient`` API, with each call that
names a session checked against the server's one ``Owners`` table. Another connection cannot prompt,
cancel, close, delete, switch or load it ("in use by another client"); a stored session that no
connection holds stays listable and opens for anyone. Each connection holds at most ``share`` live
sessions, so one client cannot fill the runtime's session map for the others.

The same door lists and opens only sessions of the directory this server serves (``Scope``).
"""

from __future__ import annotations

import logging
import os
import shlex
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openheim.acp.util import INVALID_REQUEST, RpcError
from openheim.errors import InvalidArgument, TooManySessions
from openheim.tools.sandbox import is_inside

if TYPE_CHECKING:
    from openheim.client import LoadedSession, OpenheimClient
    from openheim.conversation.history import ConversationMeta
    from openheim.runtime.session import Session

log = logging.getLogger(__name__)

MAX_SESSIONS_PER_CLIENT = 64  # live sessions one connection may hold (the runtime's map holds 2048)


def in_use(session_id: str) -> RpcError:
    return RpcError(
        INVALID_REQUEST,
        f"session {session_id} is in use by another client; open it there, or wait until that client "
        "closes it or disconnects",
        {"kind": "session_in_use", "sessionId": session_id},
    )


class ShareExhausted(TooManySessions):
    """This connection holds its share of live sessions already."""

    def __init__(self, share: int) -> None:
        super().__init__(share)
        self.message = (
            f"this client already has {share} live sessions open (the most one client may hold); "
            "close sessions you no longer use (session/close) before opening more"
        )
        self.args = (self.message,)


def canonical(session_id: str) -> str:
    """A session id as the runtime keys it (a UUID in its usual form); other text is passed on as it is."""
    try:
        return str(uuid.UUID(session_id))
    except (ValueError, AttributeError, TypeError):
        return session_id


class Owners:
    """The server's table of live sessions and the connection holding each (thread-safe)."""

    def __init__(self, share: int = MAX_SESSIONS_PER_CLIENT) -> None:
        self.share = share
        self._owner: dict[str, object] = {}
        self._opening: dict[object, int] = {}  # sessions a connection is creating right now
        self._lock = threading.Lock()

    def check(self, session_id: str, who: object) -> None:
        """RpcError (in use) when another connection holds the session."""
        with self._lock:
            owner = self._owner.get(session_id)
        if owner is not None and owner is not who:
            raise in_use(session_id)

    def held_elsewhere(self, session_id: str, who: object) -> bool:
        with self._lock:
            owner = self._owner.get(session_id)
        return owner is not None and owner is not who

    def claim(self, session_id: str, who: object, counted: bool = False) -> bool:
        """Make ``who`` the owner; True when it was not already. In use when another holds it, ShareExhausted
        when ``who`` holds its share (``counted``: its ``opening`` slot was counted already)."""
        with self._lock:
            owner = self._owner.get(session_id)
            if owner is who:
                return False
            if owner is not None:
                raise in_use(session_id)
            if not counted and self._count(who) >= self.share:
                raise ShareExhausted(self.share)
            self._owner[session_id] = who
            return True

    @contextmanager
    def opening(self, who: object) -> Iterator[None]:
        """A slot of ``who``'s share for a session being created (its id is not known yet)."""
        with self._lock:
            if self._count(who) >= self.share:
                raise ShareExhausted(self.share)
            self._opening[who] = self._opening.get(who, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._opening[who] -= 1
                if not self._opening[who]:
                    del self._opening[who]

    def release(self, session_id: str, who: object) -> None:
        with self._lock:
            if self._owner.get(session_id) is who:
                del self._owner[session_id]

    def release_all(self, who: object) -> None:
        with self._lock:
            for session_id in [s for s, owner in self._owner.items() if owner is who]:
                del self._owner[session_id]

    def held_by(self, who: object) -> list[str]:
        with self._lock:
            return [s for s, owner in self._owner.items() if owner is who]

    def _count(self, who: object) -> int:
        return sum(1 for owner in self._owner.values() if owner is who) + self._opening.get(who, 0)


@dataclass(frozen=True)
class Scope:
    """The directory this server serves: sessions rooted elsewhere are neither listed nor opened."""

    root: Path
    configured: bool  # True: work_dir came from the config; False: it is where `openheim serve` started

    def contains(self, cwd: str | os.PathLike) -> bool:
        return is_inside(os.path.realpath(cwd), os.path.realpath(self.root))

    def check(self, cwd: str | os.PathLike | None) -> None:
        """InvalidArgument, worded for what the user did, when ``cwd`` lies outside the served directory."""
        if cwd is None or self.contains(cwd):
            return
        shown = os.fspath(cwd)
        if self.configured:
            raise InvalidArgument(
                f"cwd '{shown}' is outside the configured work_dir '{self.root}'; "
                "start the session inside it or change work_dir"
            )
        raise InvalidArgument(
            f"'{shown}' is outside the directory this server serves ('{self.root}', where `openheim serve` "
            f"was started); to work there, run `openheim serve` in it: cd {shlex.quote(shown)} && openheim serve"
        )

    def openable(self, metas: list[ConversationMeta]) -> list[ConversationMeta]:
        """The stored sessions this server can open: those started inside the served directory."""
        return [meta for meta in metas if meta.cwd and self.contains(meta.cwd)]


class ConnectionClient:
    """One connection's door: the OpenheimClient API (attributes not defined here are the client's), with
    ownership checked on every call that names a session and on every session it hands out, and the listing
    limited to the served directory. Calls that only read stored sessions (stored_session) are the client's own."""

    def __init__(self, client: OpenheimClient, owners: Owners, scope: Scope) -> None:
        self.inner = client
        self.owners = owners
        self.scope = scope

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"ConnectionClient(root={str(self.scope.root)!r}, holds={len(self.owners.held_by(self))})"

    # --- opening -----------------------------------------------------------------------------

    def new_session(
        self,
        cwd: str | Path | None = None,
        model: str | None = None,
        provider: str | None = None,
        skills: list[str] | tuple[str, ...] = (),
        mcp_servers: list | None = None,
        hold: bool = False,
    ) -> OwnedSession:
        self.scope.check(cwd)
        with self.owners.opening(self):
            session = self.inner.new_session(
                cwd, model=model, provider=provider, skills=skills, mcp_servers=mcp_servers, hold=hold
            )
            self.owners.claim(session.id, self, counted=True)
        return OwnedSession(session, self)

    def resume_session(
        self, session_id: str, cwd: str | Path | None = None, mcp_servers: list | None = None, hold: bool = False
    ) -> tuple[OwnedSession, LoadedSession]:
        sid = self._resolve(session_id)
        self.scope.check(cwd)
        fresh = self.owners.claim(sid, self)  # before loading: a session live elsewhere is not touched
        try:
            session, loaded = self.inner.resume_session(sid, cwd, mcp_servers=mcp_servers, hold=hold)
        except BaseException:
            if fresh:
                self.owners.release(sid, self)
            raise
        return OwnedSession(session, self), loaded

    # --- using ------------------------------------------------------------------------------

    def session(self, session_id: str) -> OwnedSession:
        """A live session this connection holds; another client's is refused ("in use by another client")."""
        self.owners.check(canonical(session_id), self)
        return OwnedSession(self.inner.session(session_id), self)

    # --- letting go ---------------------------------------------------------------------------

    def delete_session(self, session_id: str) -> None:
        sid = self._resolve(session_id)
        self.owners.check(sid, self)
        self.inner.delete_session(sid)
        self.owners.release(sid, self)

    def let_go_all(self) -> None:
        """The connection ended: every session it held is free for the others."""
        self.owners.release_all(self)

    # --- listing ------------------------------------------------------------------------------

    def list_sessions(self, cwd: str | None = None, include_failed: bool = False) -> list[ConversationMeta]:
        return self.scope.openable(self.inner.list_sessions(cwd, include_failed))

    def _resolve(self, session_id: str) -> str:
        """The full id (a unique prefix of a stored session names it too), so a prefix cannot slip past."""
        try:
            return str(uuid.UUID(session_id))
        except (ValueError, AttributeError, TypeError):
            return self.inner.stored_session(session_id)[0].id


class OwnedSession:
    """A live Session as one connection sees it: every operation is the session's own, and closing, letting go
    or forking also keeps the connection's share of live sessions right."""

    def __init__(self, session: Session, connection: ConnectionClient) -> None:
        self.inner = session
        self.connection = connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"OwnedSession({self.inner.id!r})"

    def fork(self) -> OwnedSession:
        owners = self.connection.owners
        with owners.opening(self.connection):
            forked = self.inner.fork()
            owners.claim(forked.id, self.connection, counted=True)
        return OwnedSession(forked, self.connection)

    def close(self) -> None:
        self.inner.close()
        self.connection.owners.release(self.inner.id, self.connection)

    def let_go(self) -> None:
        self.inner.let_go()
        self.connection.owners.release(self.inner.id, self.connection)
