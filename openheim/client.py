"""OpenheimClient: the one construction path for the runtime, used by every front end and by embedders."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from openheim.core.models import AgentResult, ContentBlock, ImageBlock, Message, StreamEvent, TextBlock, Tool

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.config.schema import Config
    from openheim.core.client_io import ClientIo
    from openheim.core.llm.base import LlmClient
    from openheim.core.permission import PermissionGate
    from openheim.core.runtime.state import AgentState, LoadedSession
    from openheim.tools.registry import ToolHandler

BUILTIN_PROVIDERS = {
    "openai": ("https://api.openai.com/v1", "gpt-4o"),
    "anthropic": ("https://api.anthropic.com/v1", "claude-sonnet-4-6"),
    "gemini": ("https://generativelanguage.googleapis.com/v1beta", "gemini-3.8-flash"),
}


def to_blocks(prompt: str | list[ContentBlock], images: list[tuple[str, str]] = ()) -> list[ContentBlock]:
    """Prompt text (empty adds no block) followed by (base64 data, mime type) images, in order."""
    blocks: list[ContentBlock] = [TextBlock(prompt)] if isinstance(prompt, str) and prompt else []
    if not isinstance(prompt, str):
        blocks = list(prompt)
    blocks.extend(ImageBlock(data, mime) for data, mime in images)
    return blocks


class SessionHandle:
    """One conversation: prompt it, cancel it, switch its model or mode."""

    def __init__(self, client: OpenheimClient, session_id: str) -> None:
        self._client = client
        self.id = session_id
        self._gate: PermissionGate | None = None
        self._io: ClientIo | None = None
        self.context_usage = None

    def permission_gate(self, gate: PermissionGate) -> SessionHandle:
        self._gate = gate
        return self

    def client_io(self, io: ClientIo) -> SessionHandle:
        self._io = io
        return self

    def prompt(self, prompt: str | list[ContentBlock], on_event: Callable[[StreamEvent], None] | None = None,
               images: list[tuple[str, str]] = (), extra_skills: list[str] = ()) -> AgentResult:
        """Run one turn on the calling thread; ``on_event`` sees every StreamEvent as it happens."""
        result = self._client.state.prompt(self.id, to_blocks(prompt, images), self._gate, self._io, on_event,
                                           extra_skills)
        self.context_usage = result.context_usage or self.context_usage
        return result

    def cancel(self) -> None:
        self._client.state.cancel(self.id)

    def switch_model(self, provider: str | None, model: str | None = None) -> AgentConfig:
        return self._client.state.set_model(self.id, provider, model)

    def set_mode(self, mode: str) -> str:
        return self._client.state.set_mode(self.id, mode)

    @property
    def config(self) -> AgentConfig:
        return self._client.state.session(self.id).config


class OpenheimClient:
    """The library facade around AgentState."""

    def __init__(self, state: AgentState) -> None:
        self.state = state

    @staticmethod
    def builder() -> OpenheimBuilder:
        return OpenheimBuilder()

    @classmethod
    def from_config(cls, path: str | Path) -> OpenheimClient:
        return cls.builder().config_path(path).build()

    @property
    def config(self) -> Config:
        return self.state.config

    @property
    def data_dir(self) -> Path:
        return self.state.settings.data_dir

    def new_session(self, cwd: str | Path | None = None, model: str | None = None, provider: str | None = None,
                    skills: list[str] = ()) -> SessionHandle:
        session = self.state.new_session(Path(cwd or os.getcwd()).absolute(), model, provider, skills)
        return SessionHandle(self, session.id)

    def resume_session(self, session_id: str, cwd: str | Path | None = None) -> tuple[SessionHandle, LoadedSession]:
        loaded = self.state.load_session(session_id, Path(cwd).absolute() if cwd else None)
        return SessionHandle(self, loaded.session.id), loaded

    def list_sessions(self, cwd: str | None = None) -> list:
        return self.state.list_sessions(cwd)

    def get_session(self, session_id: str) -> list[Message]:
        from openheim.core.runtime.state import check_session_id

        return self.state.memory.history.load(check_session_id(session_id)).messages

    def delete_session(self, session_id: str) -> None:
        self.state.delete_session(session_id)

    def models(self) -> list[tuple[str, str]]:
        return self.state.models()

    def tools(self) -> list[Tool]:
        return self.state.registry.definitions()


class OpenheimBuilder:
    """Collects options; ``build()`` loads config (file mode) or synthesises one (programmatic mode)."""

    def __init__(self) -> None:
        self._opts: dict = {}
        self._tools: list[ToolHandler] = []
        self._llm_factory: Callable[[AgentConfig], LlmClient] | None = None

    def _set(self, key: str, value: object) -> OpenheimBuilder:
        self._opts[key] = value
        return self

    def config_path(self, path: str | Path | None) -> OpenheimBuilder:
        return self._set("config_path", path)

    def provider(self, name: str | None) -> OpenheimBuilder:
        return self._set("provider", name)

    def model(self, name: str | None) -> OpenheimBuilder:
        return self._set("model", name)

    def api_key(self, key: str) -> OpenheimBuilder:
        return self._set("api_key", key)

    def api_base(self, url: str) -> OpenheimBuilder:
        return self._set("api_base", url)

    def max_iterations(self, n: int | None) -> OpenheimBuilder:
        return self._set("max_iterations", n)

    def timeout_secs(self, n: int | None) -> OpenheimBuilder:
        return self._set("timeout_secs", n)

    def max_tokens(self, n: int | None) -> OpenheimBuilder:
        return self._set("max_tokens", n)

    def context_window(self, n: int | None) -> OpenheimBuilder:
        return self._set("context_window", n)

    def default_skills(self, skills: list[str]) -> OpenheimBuilder:
        return self._set("default_skills", list(skills))

    def work_dir(self, path: str | Path | None) -> OpenheimBuilder:
        return self._set("work_dir", path)

    def allow_shell(self, allow: bool | None) -> OpenheimBuilder:
        return self._set("allow_shell", allow)

    def data_dir(self, path: str | Path | None) -> OpenheimBuilder:
        return self._set("data_dir", path)

    def tool(self, handler: ToolHandler) -> OpenheimBuilder:
        self._tools.append(handler)
        return self

    def llm_factory(self, factory: Callable[[AgentConfig], LlmClient]) -> OpenheimBuilder:
        """Use a custom LlmClient (any provider not built in, or a fake in tests)."""
        self._llm_factory = factory
        return self

    def build(self) -> OpenheimClient:
        from openheim.core.runtime.build import build_state

        return OpenheimClient(build_state(self._opts, self._tools, self._llm_factory))
