"""The `:` commands of the chat: sessions, models, config, MCP, skills, theme, memory and cost."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openheim.config.prices import dollars
from openheim.config.resolve import key_problem
from openheim.config.secrecy import scrub_url
from openheim.core.events import Compaction
from openheim.core.models import (
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    transcript,
)
from openheim.core.tools import parse_arguments
from openheim.errors import OpenheimError
from openheim.tools.plan import plan_text
from openheim.tui.frame import compaction_text, tool_line
from openheim.tui.overlay import HELP, ListView
from openheim.tui.theme import THEMES

if TYPE_CHECKING:
    from openheim.conversation.history import ConversationMeta
    from openheim.core.events import PlanUpdate
    from openheim.core.models import Message
    from openheim.mcp.status import McpServerStatus
    from openheim.runtime.session import Session
    from openheim.tui.app import App

BUSY = "wait for the reply to finish (or press Ctrl-C to cancel it) before using :{name}"
IDLE_ONLY = {"new", "sessions", "models", "compact", "undo", "fork", "prompt"}


def run(app: App, line: str) -> None:
    """Run one command line (it starts with ``:``)."""
    name, _, arg = line[1:].strip().partition(" ")
    name, arg = name.lower(), arg.strip()
    handler = COMMANDS.get(name)
    if handler is None:
        app.info(f":{name}: unknown command  (try :help)")
        return
    if name in IDLE_ONLY and app.busy:
        app.info(BUSY.format(name=name))
        return
    app.safely(f":{name}", handler, app, arg)


def quit_(app: App, arg: str) -> None:
    if app.turn is not None:
        app.turn.cancel()
    app.quit()


def help_(app: App, arg: str) -> None:
    app.info(HELP)


# --- sessions --------------------------------------------------------------------------


def new(app: App, arg: str) -> None:
    """A new session with the same skills, on the current model if it still resolves."""
    cfg = app.session.config
    try:
        try:
            handle = app.client.new_session(app.cwd, model=cfg.model, provider=cfg.provider_name, skills=app.skills)
        except OpenheimError:
            handle = app.client.new_session(app.cwd, skills=app.skills)
    except OpenheimError as e:
        app.info(f"failed to start new session: {e.message}")
        return
    switch_to(app, handle)
    app.transcript.add("rule", "new session")


def switch_to(app: App, handle: Session) -> None:
    """Make ``handle`` the chat's session; the old one is closed (its history stays on disk)."""
    old = app.session
    app.session = handle.permission_gate(app.gate)
    if old.id != handle.id:
        old.close()
    app.context, app.cost, app.calls, app.dollars, app.plan = None, Usage(), 0, None, None
    app.scroll.to_bottom()


def sessions(app: App, arg: str) -> None:
    metas = app.client.list_sessions()
    if not metas:
        app.info("no sessions yet")
        return
    rows = [session_row(m) for m in metas]
    view = ListView("Sessions", rows, list(metas), on_pick=lambda m: open_session(app, m))
    view.index = next((i for i, m in enumerate(metas) if m.id == app.session.id), 0)
    app.overlay = view


def session_row(meta: ConversationMeta) -> str:
    title = " ".join((meta.title or "(untitled)").split())
    when = meta.updated_at[:16].replace("T", " ")
    return f"{when}  {title}  [{meta.provider or '?'} / {meta.model or '?'}]"


def open_session(app: App, meta: ConversationMeta) -> None:
    """Reopen a stored session: the transcript is replaced by its replayed history."""
    try:
        handle, loaded = app.client.resume_session(meta.id)
    except OpenheimError as e:
        app.info(f"could not open the session: {e.message}")
        return
    switch_to(app, handle)
    app.context = meta.context_usage
    app.transcript.clear()
    app.transcript.add("rule", " ".join((meta.title or "(untitled)").split()))
    if loaded.warning:
        app.info(loaded.warning)
    replay(app, loaded.messages)
    app.transcript.add("rule", "session restored")


def replay(app: App, messages: list[Message]) -> None:
    """Stored messages as the chat showed them (images as placeholder lines)."""
    calls: dict[str, Any] = {}
    add = app.transcript.add
    for role, block in transcript(messages):
        if isinstance(block, TextBlock):
            add("user" if role == "user" else "assistant", block.text)
        elif isinstance(block, ThinkingBlock):
            add("thinking", block.thinking)
        elif isinstance(block, ToolUseBlock):
            view = app.session.present(block.name, parse_arguments(block.arguments))
            calls[block.id] = add("tool", tool_line(view, block.name, block.arguments), status="running")
        elif isinstance(block, ToolResultBlock):
            status = "error" if block.is_error else "ok"
            call = calls.pop(block.tool_call_id, None)
            if call is not None:
                call.set_status(status)
            app.transcript.insert_after(call, "result", block.content, status=status)
        elif isinstance(block, ImageBlock):
            add("info", f"[image: {block.mime_type}]")
    app.transcript.close_stream()


# --- models, config, theme -------------------------------------------------------------------


def models(app: App, arg: str) -> None:
    if arg:
        try:
            cfg = app.session.switch_model(None, arg)
        except OpenheimError as e:
            app.info(f"unknown model: {e.message}")
            return
        app.info(f"switched to {cfg.provider_name} / {cfg.model}")
        return
    pairs = sorted(app.client.models())
    current = (app.session.config.provider_name, app.session.config.model)
    problems = _provider_problems(app)
    rows = [
        f"{p} / {m}" + ("  (current)" if (p, m) == current else "") + (f"  ✗ {problems[p]}" if problems.get(p) else "")
        for p, m in pairs
    ]
    view = ListView("Models", rows, pairs, on_pick=lambda pair: _switch_model(app, pair))
    view.index = pairs.index(current) if current in pairs else 0
    app.overlay = view


def _provider_problems(app: App) -> dict[str, str | None]:
    """Why each provider cannot be used now (no key), by name."""

    return {name: key_problem(p) for name, p in app.client.config.providers.items()}


def _switch_model(app: App, pair: tuple[str, str]) -> None:
    if app.busy:
        app.info(BUSY.format(name="models"))
        return
    problem = _provider_problems(app).get(pair[0])
    if problem:
        app.info(f"{pair[0]} / {pair[1]} cannot be used: {problem} (or api_key in config.toml), then pick it again")
        return
    try:
        cfg = app.session.switch_model(*pair)
    except OpenheimError as e:
        app.info(f"unknown model: {e.message}")
        return
    app.info(f"switched to {cfg.provider_name} / {cfg.model}")


def config(app: App, arg: str) -> None:
    cfg, conf = app.session.config, app.client.config
    rows = [
        f"{'Provider':<16}{cfg.provider_name}",
        f"{'Model':<16}{cfg.model}",
        f"{'Max iterations':<16}{cfg.max_iterations}",
        f"{'Timeout':<16}{cfg.timeout_secs}s",
    ]
    for i, (name, provider) in enumerate(sorted(conf.providers.items())):
        mark = "  (default)" if name == conf.default_provider else ""
        rows.append(f"{'Providers' if i == 0 else '':<16}{name}{mark}: {provider.default_model}")
    servers = ", ".join(sorted(conf.mcp_servers)) or "none"
    rows.append(f"{'MCP Servers':<16}{servers}")
    app.overlay = ListView("Config", rows)


def theme(app: App, arg: str) -> None:
    if not arg:
        names = list(THEMES)
        view = ListView(
            "Themes",
            [n + ("  (current)" if n == app.theme else "") for n in names],
            names,
            on_pick=lambda name: set_theme(app, name),
        )
        view.index = names.index(app.theme) if app.theme in names else 0
        app.overlay = view
        return
    if arg not in THEMES:
        app.info(f":{arg}: unknown theme  (available: {', '.join(THEMES)})")
        return
    set_theme(app, arg)


def set_theme(app: App, name: str) -> None:
    """Apply a theme now and save it as [tui].theme_color."""
    app.theme = name
    if app.screen is not None:
        app.screen.set_theme(name)
    try:
        app.client.save_theme(name)
    except OpenheimError as e:
        app.info(f"theme set to {name} (could not save: {e.message})")
        return
    app.info(f"theme set to {name}")


# --- MCP, skills, memory, cost ---------------------------------------------------------------


def mcp(app: App, arg: str) -> None:
    """What the runtime reports about each MCP server, with where it runs from the config."""
    configured = app.client.config.mcp_servers
    reported = {s.name: s for s in app.client.mcp_servers()}
    rows = []
    for name in sorted(set(configured) | {n for n in reported if n}):
        server, status = configured.get(name), reported.get(name)
        where = _where(server) if server is not None else (status.transport if status else "")
        rows.append(f"{name:<16}{where}{_mcp_status(status)}")
    prompts = app.session.mcp_prompts()
    if prompts:
        rows += ["", "prompts (:prompt server/name name=value ...):", *(f"  {p.summary()}" for p in prompts)]
    if any(s.state == "starting" for s in reported.values()):
        rows += ["", "some servers are still starting: :mcp again shows them (and their prompts) once they are up"]
    app.overlay = ListView(
        "MCP servers", rows, empty="no MCP servers configured\nadd an [mcp_servers.<name>] table to config.toml"
    )


def prompt(app: App, arg: str) -> None:
    """``:prompt server/name name=value ...``: the MCP prompt's messages, fetched off the UI thread, sent as
    your message."""
    name, _, arguments = arg.partition(" ")
    if not name:
        known = ", ".join(p.ref for p in app.session.mcp_prompts()) or "none (see :mcp)"
        app.info(f"usage: :prompt server/name name=value ...  (prompts: {known})")
        return
    session = app.session
    app.info(f"getting MCP prompt {name}…")
    app.background(lambda: session.expand_mcp_prompt(name, arguments), lambda text: _send_prompt(app, name, text))


def _send_prompt(app: App, name: str, outcome: Any) -> None:
    if isinstance(outcome, Exception):
        app.error(outcome)
    elif app.busy:
        app.info(BUSY.format(name="prompt"))
    else:
        app.send(outcome)


def _where(server: Any) -> str:
    """How a configured server is reached; a command's arguments are counted, not shown (they may hold secrets)."""

    if server.url:
        return f"http  {scrub_url(server.url)}"
    args = f" ({len(server.args)} args)" if server.args else ""
    return f"stdio  {server.command}{args}"


def _mcp_status(status: McpServerStatus | None) -> str:
    """The runtime's word on a server: its state, how many tools it offers, its error."""
    if status is None:
        return ""
    parts = [status.state]
    if status.tool_count:
        parts.append(f"{status.tool_count} tools")
    if status.error:
        parts.append(status.error)
    shown = [p for p in parts if p]
    return ("  · " + " · ".join(shown)) if shown else ""


def skills(app: App, arg: str) -> None:
    found = app.client.skills()
    rows = [
        f"{s.name:<20}{getattr(s, 'description', '') or ''}" + ("  (on)" if s.name in app.skills else "") for s in found
    ]
    where = app.client.data_dir / "skills"
    app.overlay = ListView("Skills", rows, empty=f"no skills available\nadd <name>.md files to {where}")


def memory(app: App, arg: str) -> None:
    if not arg:
        app.info("usage: :memory QUERY  (searches long-term memory)")
        return
    ltm = app.client.memory()
    if ltm is None:
        app.info("long-term memory is not available in this setup")
        return
    app.info(f"searching memory for '{arg}'…")
    app.background(lambda: (ltm.search_detailed(arg), ltm.count()), lambda r: _memory_hits(app, arg, r))


def _memory_hits(app: App, query: str, outcome: Any) -> None:
    if isinstance(outcome, Exception):
        app.error(outcome)
        return
    result, total = outcome
    if not result.hits:
        app.info("long-term memory is empty" if total == 0 else f"no notes match '{query}'  ({result.mode} search)")
        return
    lines = [f"{len(result.hits)} note(s), {result.mode} search:"]
    for hit in result.hits:
        text = " ".join(hit.content.split())
        lines.append(f"#{hit.id}  {hit.created_at:%Y-%m-%d}  {text[:160] + ('…' if len(text) > 160 else '')}")
    app.info("\n".join(lines))


def plan(app: App, arg: str) -> None:
    """The model's latest plan in this session (what update_plan sent)."""
    if app.plan is None:
        app.info("no plan yet: the model sends one with update_plan on tasks of several steps")
        return
    app.info(plan_lines(app.plan))


def plan_lines(update: PlanUpdate) -> str:

    steps = tuple((e["step"], e["status"]) for e in update.entries)
    head = "plan" + (f": {update.explanation}" if update.explanation else "")
    return head + "\n" + plan_text(steps)


def cost(app: App, arg: str) -> None:

    u = app.cost
    cfg = app.session.config
    if app.dollars is not None:
        spent = f"  cost     {dollars(app.dollars):>10} (subagents included)"
    elif cfg.price is not None:
        spent = f"  cost     {dollars(0.0):>10}"
    else:
        spent = (
            f'  cost     unknown: add [prices."{cfg.provider_name}/{cfg.model}"] (input, output per million '
            "tokens) to config.toml"
        )
    app.info(
        f"this session: {app.calls} model call(s)\n"
        f"  input    {u.input_tokens:>10,} tokens\n"
        f"  output   {u.output_tokens:>10,} tokens\n"
        f"  cached   {u.cache_read_tokens:>10,} tokens read, {u.cache_creation_tokens:,} written\n" + spent
    )


def image(app: App, arg: str) -> None:
    """Attach an image file to the next message."""
    if not arg:
        app.info(":image PATH attaches a PNG, JPEG, GIF or WebP file to your next message")
        return
    app.attach(arg)


# --- long sessions: compact, undo, fork -------------------------------------------------------


def compact(app: App, arg: str) -> None:
    """Summarise the conversation now, off the UI thread (it is a model call)."""

    app.info("compacting the conversation…")
    session = app.session

    def done(outcome: Any) -> None:
        if isinstance(outcome, Exception):
            app.error(outcome)
        elif outcome.record is None:
            app.info(f"the conversation was not compacted: {outcome.error}")
        else:
            record = outcome.record
            app.info(
                compaction_text(
                    Compaction(record.at, record.keep_from, record.summary, record.model, record.usage, True)
                )
            )

    app.background(session.compact, done)


def undo(app: App, arg: str) -> None:
    """``:undo [N] [yes] [force]``: show what undoing the last N file-changing turns restores; with yes, do it."""
    words = arg.lower().split()
    turns = next((int(w) for w in words if w.isdigit()), 1)
    force = "force" in words
    plan = app.session.plan_undo(turns)
    lines = [f"undo of turn {', '.join(str(r.turn) for r in plan.turns)}:", *plan.diffstat()]
    if "yes" not in words and not force:
        lines.append(f"type :undo {turns} yes to restore these files")
        app.info("\n".join(lines))
        return
    result = app.session.undo(turns, force=force)
    lines.extend(result.summary())
    app.info("\n".join(lines))


def fork(app: App, arg: str) -> None:
    """Continue in a copy of this session; the original stays as it is."""
    original = app.session.id
    handle = app.session.fork()
    switch_to(app, handle)
    app.transcript.add("rule", f"forked: this is a new session; {original[:8]}… stays as it was")


COMMANDS: dict[str, Callable[[App, str], None]] = {
    "q": quit_,
    "quit": quit_,
    "help": help_,
    "new": new,
    "sessions": sessions,
    "config": config,
    "models": models,
    "mcp": mcp,
    "skills": skills,
    "theme": theme,
    "memory": memory,
    "cost": cost,
    "image": image,
    "compact": compact,
    "undo": undo,
    "fork": fork,
    "plan": plan,
    "prompt": prompt,
}
