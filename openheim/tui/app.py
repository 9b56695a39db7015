"""The chat app: the UI thread owns the screen and polls keys, the Turn's events and permission requests.

The agent runs on the Turn's worker thread (started by the client); nothing here blocks on it, and no
other thread calls curses. Commands (``:models`` ...) live in ``commands.py``.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openheim.core import events
from openheim.core.asking import AskTheFrontEnd
from openheim.core.control_chars import one_line
from openheim.core.images import load_image, looks_like_image_path
from openheim.core.models import ImageBlock, TextBlock, Usage
from openheim.errors import OpenheimError, describe
from openheim.tui import commands
from openheim.tui.editor import InputLine
from openheim.tui.frame import call_key, compaction_text, compose, present, tool_line
from openheim.tui.gate import Questions
from openheim.tui.history import PromptHistory
from openheim.tui.keys import Key, KeyDecoder
from openheim.tui.overlay import ANSWERED, PERMISSION_OPTIONS, WHEEL, ListView, overlay_key
from openheim.tui.theme import theme_name
from openheim.tui.transcript import Item, Scroll, Transcript

if TYPE_CHECKING:
    from openheim.client import OpenheimClient
    from openheim.core.events import StreamEvent
    from openheim.core.permission import Decision, Question
    from openheim.core.tools import ToolView
    from openheim.runtime.session import Session
    from openheim.runtime.turn import Turn
    from openheim.tui.screen import Row, Screen

log = logging.getLogger(__name__)

TICK = 0.08  # seconds per spinner frame
KEY_WAIT_MS = 40  # how long one loop waits for a key (and so the longest delay before new text shows)
KEY_BURST = 4096  # keys taken in one go (a paste) before the screen is drawn again
CHAT_PAGE = 20
SCROLLS = {"scroll-up": -1, "scroll-down": 1, "wheel-up": -WHEEL, "wheel-down": WHEEL}
STOP_WAIT = 3.0  # seconds a hang-up or quit waits for a cancelled turn to save and let go
GONE_AFTER = 50  # reads in a row that fail at once: the terminal is gone


class App:
    """State of the chat screen and the loop that drives it."""

    def __init__(self, client: OpenheimClient, session: Session, skills: list[str], version: str) -> None:
        self.client, self.skills, self.version = client, list(skills), version
        self.cwd = str(session.cwd)
        self.gate = AskTheFrontEnd()  # questions arrive as PermissionAsked events; self.questions holds them
        self.questions = Questions()
        self.session = session.permission_gate(self.gate)
        self.transcript = Transcript()
        self.scroll = Scroll()
        self.input = InputLine()
        self.prompts = PromptHistory()
        self.decoder = KeyDecoder()
        self.overlay: ListView | None = None
        self.theme = theme_name(client.config.theme_color)
        self.turn: Turn | None = None
        self.phase = ""
        self.notice = ""  # the last notice shown as the phase (it gives way when the model is asked)
        self.tools: dict[str, Item] = {}
        self.tails: dict[str, Item] = {}  # the last line shown for a tool call: what follows it goes after
        self.views: dict[str, ToolView] = {}
        self.context: Usage | None = None
        self.plan: events.PlanUpdate | None = None  # the model's latest plan (update_plan), for :plan
        self.cost, self.calls = Usage(), 0
        self.dollars: float | None = None  # what the session has spent, when its model has a price
        self.images: list[ImageBlock] = []  # attached with :image or a pasted path: sent with the next message
        self.shown: Question | None = None
        self.choice = 0
        self.inbox: queue.Queue[tuple[Callable[[Any], None], Any]] = queue.Queue()
        self.interrupts = 0
        self.hangup = 0
        self.done = False
        self.exit_code = 0
        self.dirty = True
        self.tick = -1
        self._fast_reads = 0
        self.screen: Screen | None = None

    # --- the loop -----------------------------------------------------------------

    def run(self, screen: Screen) -> int:
        """Drive the screen until quit, hang-up or lost terminal; returns the exit code."""
        self.screen = screen
        screen.set_theme(self.theme)
        try:
            while not self.done:
                self.step()
        finally:
            self.questions.close()
        return self.exit_code

    def step(self) -> None:
        self._signals()
        self._pump_turn()
        self._pump_inbox()
        self._watch_permission()
        self._tick()
        if self.dirty and not self.done:
            self.draw()
        if not self.done:
            self._read_keys()

    def on_signal(self, signum: int) -> None:
        """Called from the signal handler: only flags; the loop acts on them."""
        if signum == signal.SIGINT:
            self.interrupts += 1
        else:
            self.hangup = signum

    def _signals(self) -> None:
        if self.hangup:
            self._stop_for_signal(self.hangup)
            return
        while self.interrupts:
            self.interrupts -= 1
            self.interrupt()

    def interrupt(self) -> None:
        """Ctrl-C: cancel the running reply; quit when idle (or when a cancelled reply is still winding down)."""
        if self.turn is None or self.turn.cancelled:
            self.quit()
            return
        self.turn.cancel()
        self.phase = "cancelling"
        self.dirty = True

    def quit(self, code: int = 0) -> None:
        self.done, self.exit_code = True, code

    def _stop_for_signal(self, signum: int) -> None:
        """SIGHUP (the SSH connection dropped) or SIGTERM: stop tools and the turn, let it save, exit 128+signal."""
        from openheim.tools.process import kill_all

        log.warning("signal %d: cancelling the turn, saving the session and exiting", signum)
        self.questions.close()
        kill_all()
        turn = self.turn
        if turn is not None:
            turn.cancel()
            turn.join(STOP_WAIT)
        self.quit(128 + signum)

    def _tick(self) -> None:
        if self.turn is not None:
            tick = int(time.monotonic() / TICK)
            if tick != self.tick:
                self.tick, self.dirty = tick, True

    def _read_keys(self) -> None:
        screen = self.screen
        assert screen is not None
        started = time.monotonic()
        raw = screen.read(KEY_WAIT_MS)
        if raw is None:
            self._idle_read(time.monotonic() - started)
            return
        self._fast_reads = 0
        for _ in range(KEY_BURST):
            for key in self.decoder.feed(raw):
                self.on_key(key)
            raw = screen.read(0)
            if raw is None or self.done:
                break
        for key in self.decoder.flush():
            self.on_key(key)

    def _idle_read(self, elapsed: float) -> None:
        """A read that fails at once, again and again, means the terminal went away (stdin closed)."""
        for key in self.decoder.flush():
            self.on_key(key)
        if elapsed < KEY_WAIT_MS / 4000:
            self._fast_reads += 1
            if self._fast_reads >= GONE_AFTER:
                self.hangup = signal.SIGHUP
        else:
            self._fast_reads = 0

    def background(self, work: Callable[[], Any], then: Callable[[Any], None]) -> None:
        """Run ``work`` off the UI thread; ``then(result or exception)`` runs on the UI thread."""

        def run() -> None:
            try:
                result = work()
            except Exception as e:
                result = e
            self.inbox.put((then, result))

        threading.Thread(target=run, name="openheim-tui-work", daemon=True).start()

    def _pump_inbox(self) -> None:
        while True:
            try:
                then, result = self.inbox.get_nowait()
            except queue.Empty:
                return
            self.safely("a background result", then, result)
            self.dirty = True

    # --- the turn -----------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.turn is not None

    def send(self, text: str) -> None:
        """Show the user's message and start the turn."""
        images, self.images = self.images, []
        shown = text + "".join(f"\n[image {i + 1}: {b.mime_type}]" for i, b in enumerate(images))
        self.transcript.add("user", shown)
        self.scroll.to_bottom()
        try:
            self.turn = self.session.start_turn([TextBlock(text), *images] if images else text)
        except OpenheimError as e:
            self.error(e)
            return
        self.phase = "thinking"

    def attach(self, path: str) -> None:
        """Attach an image file to the next message (a one-line error when it is not a usable image)."""
        block = load_image(path)
        self.images.append(block)
        size = len(block.data) * 3 // 4
        self.info(
            f"image attached: {path} ({block.mime_type}, {size // 1024} KB); it goes with your next message "
            f"({len(self.images)} attached)"
        )

    def _pump_turn(self) -> None:
        turn = self.turn
        if turn is None:
            return
        batch = turn.poll(0)
        for event in batch:
            try:
                self.on_event(turn, event)
            except Exception:  # a display problem must never end the chat
                log.exception("could not show a %s event", event.kind)
        if batch:
            self.dirty = True
        if turn.ended:
            self._finish(turn)

    def on_event(self, turn: Turn, event: StreamEvent) -> None:
        """Show one event of the running turn."""
        if isinstance(event, (events.LlmResponse, events.ThinkingContent)):
            self._stream(event)
        elif isinstance(event, events.ToolCall):
            self._tool_call(turn, event, event.id, 0, "")
        elif isinstance(event, events.ToolResult):
            self._tool_result(event, event.id, 0)
        elif isinstance(event, events.SubagentEvent):
            self._subagent(turn, event)
        elif isinstance(event, events.UsageReport):
            self.context = event.usage
            self.cost, self.calls = self.cost + event.usage, self.calls + 1
            if event.total_cost is not None:
                self.dollars = event.total_cost
        elif isinstance(event, events.PlanUpdate):
            self.plan = event
            self.info(commands.plan_lines(event))
        elif isinstance(event, events.ContextTrimmed):
            self.info(f"{event.dropped} earlier messages left out to fit the context window")
        elif isinstance(event, events.Compaction):
            self.info(compaction_text(event))
        elif isinstance(event, events.IterationStart):
            self.transcript.close_stream()
            if self.notice and self.phase == self.notice:  # the wait the notice spoke of is over
                self.phase = "thinking"
        elif isinstance(event, events.Notice):
            self._notice(event)
        elif isinstance(event, events.PermissionAsked):
            self.questions.add(event.question)
            self._watch_permission()

    def _stream(self, event: events.LlmResponse | events.ThinkingContent) -> None:
        if event.content:
            kind = "assistant" if isinstance(event, events.LlmResponse) else "thinking"
            self.transcript.stream(kind, event.content)
            if self.phase != "cancelling":
                self.phase = "streaming" if kind == "assistant" else "thinking"

    def _subagent(self, turn: Turn, event: events.SubagentEvent) -> None:
        inner = event.event
        key = f"{event.subagent}:{event.parent_tool_call_id}:{getattr(inner, 'id', '')}"  # as call_key() makes it
        if isinstance(inner, events.UsageReport):
            self.cost, self.calls = self.cost + inner.usage, self.calls + 1  # :cost counts subagents too
        elif isinstance(inner, events.ToolCall):
            self._tool_call(turn, inner, key, 1, f"[{event.subagent}] ")
        else:
            self._tool_result(inner, key, 1)

    def _notice(self, event: events.Notice) -> None:
        """In the status line while the turn waits; a warning also stays in the transcript."""
        text = one_line(event.text)
        if self.phase != "cancelling":
            self.phase = self.notice = text
        if event.level == "warning":
            self.info(text)

    def _tool_call(self, turn: Turn, call: events.ToolCall, key: str, depth: int, label: str) -> None:
        view = present(turn.present, call.tool_name, call.arguments)
        self.views[key] = view
        item = self.transcript.add(
            "tool", label + tool_line(view, call.tool_name, call.arguments), status="running", depth=depth
        )
        self.tools[key] = self.tails[key] = item
        if self.phase != "cancelling":
            self.phase = "running tools"

    def _tool_result(self, result: events.ToolResult, key: str, depth: int) -> None:
        status = "error" if result.is_error else "ok"
        item = self.tools.pop(key, None)
        if item is not None:
            item.set_status(status)
        self.transcript.insert_after(self.tails.pop(key, item), "result", result.result, status=status, depth=depth)

    def _finish(self, turn: Turn) -> None:
        """The turn ended: its outcome, stop notice or error, and the context it left."""
        self.turn, self.phase = None, ""
        self.transcript.close_stream()
        for item in self.tools.values():
            item.set_status("error")
        self.tools.clear()
        self.tails.clear()
        self.views.clear()
        if turn.cancelled:
            self.info("cancelled")
        elif turn.error is not None:
            self.error(turn.error)
        else:
            result = turn.result
            self.context = result.context_usage or self.context
            notice = result.budget.notice if result.budget is not None else result.stop_reason.notice
            if notice:
                self.info(notice)
        self.dirty = True

    # --- permission -----------------------------------------------------------------

    def _watch_permission(self) -> None:
        ask = self.questions.current()
        if ask is not self.shown:
            self.shown, self.choice, self.dirty = ask, 0, True

    def answer(self, decision: Decision) -> None:
        ask = self.shown
        if ask is None:
            return
        self.questions.answer(ask, decision)
        text = f"{ANSWERED[decision]} '{ask.request.tool_name}'"
        key = call_key(ask.request)
        tail = self.tails.get(key)
        if tail is None:
            self.info(text)
        else:
            self.tails[key] = self.transcript.insert_after(tail, "info", text)
        self._watch_permission()

    # --- keys -----------------------------------------------------------------------

    def on_key(self, key: Key) -> None:
        self.dirty = True
        if key == Key("key", "resize"):
            assert self.screen is not None
            self.screen.resized()
            return
        if key == Key("key", "ctrl-c"):
            self.interrupt()
        elif key == Key("key", "ctrl-l"):
            assert self.screen is not None
            self.screen.repaint()
        elif self.shown is not None:
            self._permission_key(key)
        elif self.overlay is not None:
            self._overlay_key(key)
        else:
            self._chat_key(key)

    def _permission_key(self, key: Key) -> None:
        decisions = {k: d for k, _, d in PERMISSION_OPTIONS}
        if key.kind == "text" and key.value.lower() in decisions:
            self.answer(decisions[key.value.lower()])
        elif key.value == "up":
            self.choice = (self.choice - 1) % len(PERMISSION_OPTIONS)
        elif key.value == "down":
            self.choice = (self.choice + 1) % len(PERMISSION_OPTIONS)
        elif key.value == "enter":
            self.answer(PERMISSION_OPTIONS[self.choice][2])

    def _overlay_key(self, key: Key) -> None:
        overlay = self.overlay
        assert overlay is not None
        outcome = overlay_key(overlay, key, self.chat_height())
        if outcome is not None:
            self.overlay = None
        if outcome == "pick":
            assert overlay.on_pick is not None
            self.safely(overlay.title, overlay.on_pick, overlay.chosen())

    def _chat_key(self, key: Key) -> None:
        line = self.input
        if key.kind in ("text", "paste"):
            line.insert(key.value)
            return
        name = key.value
        if line.edit(name):
            return
        if name == "end":
            line.end() if line.text else self.scroll.to_bottom()
        elif name == "enter":
            self.submit()
        elif name in ("alt-enter", "ctrl-j"):
            line.insert("\n")
        elif name in ("up", "down"):
            recalled = self.prompts.older(line.text) if name == "up" else self.prompts.newer()
            if recalled is not None:
                line.set(recalled)
        else:
            page = max(1, min(CHAT_PAGE, self.chat_height() - 2))
            delta = SCROLLS.get(name, 0) or {"pgup": -page, "pgdn": page}.get(name, 0)
            if delta:
                self.scroll.by(delta, len(self.transcript.lines(self._width())), self.chat_height())

    def submit(self) -> None:
        """Enter: a command, or a message when no reply is running (empty input is ignored)."""
        text = self.input.text
        if not text.strip():
            return
        self.prompts.add(text)
        if text.lstrip().startswith(":"):
            self.input.take()
            commands.run(self, text.strip())
            return
        pasted = looks_like_image_path(text)
        if pasted is not None:  # a pasted (or dropped) image file: attached, not sent
            self.input.take()
            self.safely("attaching an image", self.attach, str(pasted))
            return
        if self.busy:
            self.info("a reply is still running: wait for it, or press Ctrl-C to cancel it")
            return
        self.send(self.input.take())

    def safely(self, what: str, fn: Callable[..., None], *args: Any) -> None:
        """Run a command or a pick: its errors become one line in the chat (a bug's details go to the log)."""
        try:
            fn(*args)
        except OpenheimError as e:
            self.error(e)
        except Exception as e:  # a bug must not take the chat down
            log.exception("%s failed", what)
            self.error(f"internal error in {what}: {type(e).__name__}: {e} (details in openheim.log)")

    # --- transcript helpers ---------------------------------------------------------------

    def info(self, text: str) -> None:
        self.transcript.add("info", text)
        self.dirty = True

    def error(self, error: BaseException | str) -> None:
        self.transcript.add("error", error if isinstance(error, str) else describe(error))
        self.dirty = True

    # --- drawing --------------------------------------------------------------------

    def _width(self) -> int:
        return self.screen.size()[1] if self.screen else 80

    def chat_height(self) -> int:
        return max(1, (self.screen.size()[0] if self.screen else 24) - 2)

    def draw(self) -> None:
        assert self.screen is not None
        h, w = self.screen.size()
        rows, cursor = self.frame(h, w)
        self.screen.draw(rows, cursor)
        self.dirty = False

    def frame(self, h: int, w: int) -> tuple[list[Row], tuple[int, int] | None]:
        """Every row of the screen at size h×w, and where the cursor goes (None: hidden)."""
        return compose(self, h, w)
