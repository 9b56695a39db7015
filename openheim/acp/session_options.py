"""The modes and config options (the model and mode pickers) every ACP session answer carries."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openheim.acp.util import MODES

if TYPE_CHECKING:
    from openheim.client import OpenheimClient
    from openheim.runtime.session import Session


def modes_state(current: str) -> dict:
    return {"currentModeId": current, "availableModes": [{"id": i, "name": n, "description": d} for i, n, d in MODES]}


def model_value(provider: str, model: str) -> str:
    return f"{provider}/{model}"


def config_options(client: OpenheimClient, session: Session) -> list[dict]:
    """The full option list: the model picker first, then the mode picker."""
    options = [
        {"value": model_value(p, m), "name": m, "description": p, "_meta": {"provider": p}} for p, m in client.models()
    ]
    config = session.config
    current = model_value(config.provider_name, config.model)
    if current not in {o["value"] for o in options}:
        options.insert(
            0,
            {
                "value": current,
                "name": config.model,
                "description": config.provider_name,
                "_meta": {"provider": config.provider_name},
            },
        )
    model = {
        "id": "model",
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": current,
        "options": options,
    }
    mode = {
        "id": "mode",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": session.mode,
        "options": [{"value": i, "name": n, "description": d} for i, n, d in MODES],
    }
    return [model, mode]


def parse_model_value(client: OpenheimClient, value: str) -> tuple[str | None, str]:
    """A picker value ("provider/model", or a bare model name) as (provider, model)."""
    for provider, model in client.models():
        if value == model_value(provider, model):
            return provider, model
    return None, value


def session_setup(client: OpenheimClient, session: Session) -> dict:
    """The modes and config options every session/new, load and resume answer carries."""
    return {"modes": modes_state(session.mode), "configOptions": config_options(client, session)}
