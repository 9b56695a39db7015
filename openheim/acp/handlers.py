"""The ACP methods an editor calls: initialize, sessions, prompt, cancel, modes and config options."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openheim.acp import long_commands, mcp_prompts, session_options, util
from openheim.acp.client_io import client_capabilities
from openheim.acp.convert import prompt_blocks, replay, text_chunk
from openheim.acp.lazy import LazyClient
from openheim.acp.mcp_servers import mcp_servers
from openheim.acp.prompt import ClientFeatures, PromptRun
from openheim.acp.util import RpcError, invalid_params, require_str
from openheim.core.models import TextBlock
from openheim.errors import NotFound, OpenheimError, SessionBusy
from openheim.version import __version__

if TYPE_CHECKING:
    from openheim.acp.connection import Connection
    from openheim.client import OpenheimClient
    from openheim.runtime.session import Session

log = logging.getLogger(__name__)

COMMANDS_DELAY = 0.05  # available_commands_update goes out just after the session/new answer
DEFERRED = object()  # a handler that answers later (session/prompt)


class Handlers:
    """Method name → handler; each returns the result, raises for an error, or returns DEFERRED."""

    def __init__(self, client: OpenheimClient | LazyClient, conn: Connection, allow_mcp_commands: bool = True) -> None:
        self.lazy_client = client if isinstance(client, LazyClient) else LazyClient.ready(client)
        self.conn = conn
        self.allow_mcp_commands = allow_mcp_commands  # False: a client's stdio MCP servers are refused
        self.features = ClientFeatures()
        self.runs: dict[str, PromptRun] = {}
        self._runs_lock = threading.Lock()
        self.held: set[str] = set()  # sessions this connection shows: never evicted while it is open
        self.expanding: dict[str, mcp_prompts.Expansion] = {}  # sessions whose /server.name prompt is being fetched
        self.methods = {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "session/new": self.new_session,
            "session/load": self.load_session,
            "session/resume": self.resume_session,
            "session/list": self.list_sessions,
            "session/close": self.close_session,
            "session/delete": self.delete_session,
            "session/prompt": self.prompt,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
        }

    @property
    def client(self) -> OpenheimClient:
        """The runtime, built on first need (Unavailable when it cannot be: no config, no API key, ...)."""
        return self.lazy_client.get()

    # --- handshake ---------------------------------------------------------------------

    def initialize(self, request_id: Any, params: dict) -> dict:
        """Any requested protocolVersion gets 1, the only version spoken here."""

        read, write, terminal = client_capabilities(params.get("clientCapabilities"))
        self.features = ClientFeatures(read, write, terminal)
        return {
            "protocolVersion": util.PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": True},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
            },
            "authMethods": [],
            "agentInfo": {"name": "openheim", "title": "openheim", "version": __version__},
        }

    def authenticate(self, request_id: Any, params: dict) -> dict:
        """No methods are listed (provider keys come from config.toml), so there is nothing to do."""
        return {}

    # --- sessions ---------------------------------------------------------------------

    def new_session(self, request_id: Any, params: dict) -> Any:
        cwd = _cwd(params)
        servers = mcp_servers(params, self.allow_mcp_commands)
        meta = util.meta_of(params)
        skills = meta.get("skills") or []
        if not isinstance(skills, list) or not all(isinstance(s, str) for s in skills):
            raise invalid_params("'_meta.skills' must be an array of skill names")
        model = meta.get("model")
        provider, model = (
            session_options.parse_model_value(self.client, model) if isinstance(model, str) else (None, None)
        )
        session = self.client.new_session(
            cwd, model=model, provider=provider, skills=skills, mcp_servers=servers, hold=True
        )
        self.held.add(session.id)
        self.conn.respond(request_id, {"sessionId": session.id, **session_options.session_setup(self.client, session)})
        self._announce_commands(session.id)
        return DEFERRED

    def _announce_commands(self, session_id: str) -> None:
        """available_commands_update just after the answer; again once the session's MCP servers are up, when
        their prompts (commands too) differ from those announced."""
        thread = threading.Thread(target=self._commands_for, args=(session_id,), name="acp-commands", daemon=True)
        thread.start()

    def _commands_for(self, session_id: str) -> None:
        import time

        time.sleep(COMMANDS_DELAY)
        try:
            session = self.client.session(session_id)
            servers = session.mcp_servers()
        except Exception:  # closed already
            return
        sent = self.commands(session)
        self._send_update(session_id, {"sessionUpdate": "available_commands_update", "availableCommands": sent})
        if not servers:
            return
        wait = float(self.client.config.mcp_startup_timeout_secs)
        latest = self.commands(session, wait)
        if latest != sent and session_id in self.held:  # not closed meanwhile
            self._send_update(session_id, {"sessionUpdate": "available_commands_update", "availableCommands": latest})

    def commands(self, session: Session | None = None, wait: float = 0.0) -> list[dict]:
        """/compact and /undo, then one slash command per installed skill (`/name args` runs the turn with that
        skill added), then one per prompt of the session's MCP servers (`/server.name args`, waiting up to
        ``wait`` seconds for servers still starting)."""
        try:
            skills = self.client.skills()
        except Exception as e:  # a broken skills dir must not break session/new
            log.warning("could not list skills: %s", e)
            skills = []
        return [
            *long_commands.COMMANDS,
            *(
                {
                    "name": s.name,
                    "description": s.description or f"Run this turn with the '{s.name}' skill",
                    "input": {"hint": "what to do"},
                }
                for s in skills
                if s.name not in long_commands.NAMES
            ),
            *(mcp_prompts.commands(session, wait) if session is not None else []),
        ]

    def load_session(self, request_id: Any, params: dict) -> Any:
        session_id = require_str(params, "sessionId")
        cwd = _cwd(params)
        servers = mcp_servers(params, self.allow_mcp_commands)
        self._check_idle(session_id)
        session, loaded = self.client.resume_session(
            session_id, cwd, mcp_servers=servers, hold=session_id not in self.held
        )
        self.held.add(session.id)
        if loaded.warning:
            self._send_update(session.id, text_chunk("agent_message_chunk", loaded.warning + "\n"))
        for update in replay(loaded.messages, session.present):
            self._send_update(session.id, update)
        self.conn.respond(request_id, session_options.session_setup(self.client, session))
        self._announce_commands(session.id)
        return DEFERRED

    def resume_session(self, request_id: Any, params: dict) -> Any:
        session_id = require_str(params, "sessionId")
        cwd = _cwd(params)
        servers = mcp_servers(params, self.allow_mcp_commands)
        self._check_idle(session_id)
        session, _ = self.client.resume_session(session_id, cwd, mcp_servers=servers, hold=session_id not in self.held)
        self.held.add(session.id)
        self.conn.respond(request_id, session_options.session_setup(self.client, session))
        self._announce_commands(session.id)
        return DEFERRED

    def list_sessions(self, request_id: Any, params: dict) -> dict:
        cwd = util.optional_str(params, "cwd")
        if params.get("cursor") is not None:
            raise invalid_params("unknown cursor: session/list returns every session in one page")
        sessions = []
        for meta in self.client.list_sessions(cwd):
            info = {"sessionId": meta.id, "cwd": meta.cwd or "/", "updatedAt": meta.updated_at}
            if meta.title:
                info["title"] = meta.title
            sessions.append(info)
        return {"sessions": sessions}

    def close_session(self, request_id: Any, params: dict) -> dict:
        session_id = require_str(params, "sessionId")
        self.cancel(session_id)
        try:
            self.client.session(session_id).close()
        except NotFound:  # not live: closed already, or evicted
            pass
        self.held.discard(session_id)
        return {}

    def delete_session(self, request_id: Any, params: dict) -> dict:
        session_id = require_str(params, "sessionId")
        self._check_idle(session_id)
        try:
            self.client.delete_session(session_id)
        except NotFound:
            pass
        return {}

    # --- turns -------------------------------------------------------------------

    def prompt(self, request_id: Any, params: dict) -> Any:
        session_id = require_str(params, "sessionId")
        blocks = prompt_blocks(util.require_list(params, "prompt"))
        session = self.client.session(session_id)
        first = blocks[0] if len(blocks) == 1 else None
        command = long_commands.parse(first.text.strip()) if isinstance(first, TextBlock) else None
        if command is not None:  # /compact, /undo: answered without a turn
            self._check_idle(session_id)
            long_commands.run(self.conn, request_id, session, *command, lambda u: self._send_update(session_id, u))
            return DEFERRED
        prompt = mcp_prompts.parse(session, blocks)
        if prompt is not None:  # /server.name args: the MCP prompt's text is the turn's prompt
            self._check_idle(session_id)
            self._expand_then_run(session, request_id, blocks, *prompt)
            return DEFERRED
        blocks, extra = self._slash_command(blocks)
        self._start_run(session, request_id, blocks, extra)
        return DEFERRED

    def _start_run(self, session: Session, request_id: Any, blocks: list, extra: list[str]) -> None:
        run = PromptRun(session, self.conn, request_id, blocks, extra, self.features, on_done=self._run_done)
        with self._runs_lock:
            run.start()  # SessionBusy while a turn that was not cancelled runs
            self.runs[session.id] = run

    def _expand_then_run(self, session: Session, request_id: Any, blocks: list, name: str, args: str) -> None:
        """Fetch the prompt, then run the turn with its text (see ``mcp_prompts.Expansion``)."""
        expansion = mcp_prompts.Expansion(self.conn, request_id, session, blocks, name, args)
        with self._runs_lock:
            self.expanding[session.id] = expansion

        def done() -> None:
            with self._runs_lock:
                if self.expanding.get(session.id) is expansion:
                    del self.expanding[session.id]

        expansion.start(lambda expanded: self._start_run(session, request_id, expanded, []), done)

    def _slash_command(self, blocks: list) -> tuple[list, list[str]]:
        """`/skill args` as the first text: the turn runs with that skill, the prompt is the args."""
        first = blocks[0] if blocks else None
        if not isinstance(first, TextBlock) or not first.text.startswith("/"):
            return blocks, []
        name, _, rest = first.text[1:].partition(" ")
        try:
            known = {s.name for s in self.client.skills()}
        except Exception:
            known = set()
        if name not in known:
            return blocks, []
        text = rest.strip() or f"Apply the '{name}' skill."
        return [TextBlock(text), *blocks[1:]], [name]

    def _run_done(self, run: PromptRun) -> None:
        with self._runs_lock:
            if self.runs.get(run.session_id) is run:
                del self.runs[run.session_id]

    def _check_idle(self, session_id: str) -> None:
        with self._runs_lock:
            if session_id in self.runs or session_id in self.expanding:
                raise SessionBusy(session_id)

    def cancel(self, session_id: object) -> None:
        """session/cancel (a notification): stop the running turn, if any."""
        if not isinstance(session_id, str):
            return
        with self._runs_lock:
            run = self.runs.get(session_id)
            expanding = self.expanding.pop(session_id, None)
        if expanding is not None:
            expanding.cancel()
        if run is not None:
            run.cancel()
        elif self.lazy_client.built is not None:
            try:
                self.lazy_client.built.session(session_id).cancel()
            except (OpenheimError, RpcError):  # a malformed id, a session not live, or another client's: left alone
                pass

    def let_go_all(self) -> None:
        """The connection ended: the sessions it showed may be evicted again once idle."""
        built = self.lazy_client.built
        held, self.held = self.held, set()
        if built is not None:
            for session_id in held:
                try:
                    built.session(session_id).let_go()
                except OpenheimError:  # closed or evicted meanwhile
                    pass

    def cancel_all(self) -> list[PromptRun]:
        with self._runs_lock:
            runs = list(self.runs.values())
        for run in runs:
            run.cancel()
        return runs

    # --- modes and options ---------------------------------------------------------------

    def set_mode(self, request_id: Any, params: dict) -> dict:
        session_id = require_str(params, "sessionId")
        mode = require_str(params, "modeId")
        self._apply_mode(session_id, mode)
        options = session_options.config_options(self.client, self.client.session(session_id))
        self._send_update(session_id, {"sessionUpdate": "config_option_update", "configOptions": options})
        return {}

    def _apply_mode(self, session_id: str, mode: str) -> None:
        if mode not in {m[0] for m in util.MODES}:
            raise invalid_params(f"unknown mode '{mode}'; use one of: " + ", ".join(m[0] for m in util.MODES))
        current = self.client.session(session_id).set_mode(mode)
        self._send_update(session_id, {"sessionUpdate": "current_mode_update", "currentModeId": current})

    def set_config_option(self, request_id: Any, params: dict) -> dict:
        session_id = require_str(params, "sessionId")
        config_id = require_str(params, "configId")
        value = params.get("value")
        if config_id == "model":
            if not isinstance(value, str) or not value:
                raise invalid_params("model config option requires a value id")
            provider, model = session_options.parse_model_value(self.client, value)
            self.client.session(session_id).switch_model(provider, model)
        elif config_id == "mode":
            if not isinstance(value, str):
                raise invalid_params("mode config option requires a value id")
            self._apply_mode(session_id, value)
        else:
            raise invalid_params(f"unknown session config option '{config_id}'")
        return {"configOptions": session_options.config_options(self.client, self.client.session(session_id))}

    def _send_update(self, session_id: str, update: dict) -> None:
        self.conn.notify("session/update", {"sessionId": session_id, "update": update})


def _cwd(params: dict) -> Path:
    cwd = require_str(params, "cwd")
    if "\0" in cwd:
        raise invalid_params("cwd contains a NUL byte; send the directory's path without it")
    path = Path(cwd)
    if not path.is_absolute():
        raise invalid_params(f"cwd must be an absolute path, got '{cwd}'")
    try:
        is_dir = path.is_dir()
    except (OSError, ValueError):
        is_dir = False
    if not is_dir:
        raise invalid_params(f"cwd '{cwd}' is not an existing directory; give the directory the session works in")
    return path
