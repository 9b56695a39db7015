"""`openheim doctor`'s reachability check: every configured provider endpoint, tried at once, within one deadline.

Each probe is one GET of the wire's models list (it needs no tokens and every hosted API has one); a server
that has no such list but answers at all is reachable. Nothing here follows redirects or reads a body.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

import requests

from openheim.config.endpoint import join
from openheim.config.providers import REPLAY
from openheim.config.schema import ProviderConfig
from openheim.config.secrecy import host_of
from openheim.core.llm.http_errors import describe_transport_error

PROBE_DEADLINE = 3.0  # seconds for all probes together


@dataclass(frozen=True)
class Reach:
    ok: bool
    detail: str  # what was found and, when not ok, what to do next


def models_request(p: ProviderConfig, key: str | None) -> tuple[str, dict[str, str]]:
    """The URL and headers of the wire's models list (the key in the header the wire reads it from)."""
    headers = {"User-Agent": "openheim-doctor"}
    if p.kind == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
        if key:
            headers["x-api-key"] = key
    elif p.kind == "gemini":
        if key:
            headers["x-goog-api-key"] = key
    elif key:
        headers["Authorization"] = f"Bearer {key}"
    return join(p.api_base, "/models"), headers


def judge(status: int, p: ProviderConfig) -> Reach:
    """What an HTTP status from the models list says about the endpoint."""
    host = host_of(p.api_base)
    if status in (401, 403):
        where = f"${p.env_var}" if p.env_var else "api_key"
        return Reach(False, f"{host} refused the key (HTTP {status}); check {where}")
    if status >= 500:
        return Reach(False, f"{host} answered HTTP {status}; the server has a problem, try again later")
    return Reach(True, f"{host} answered")  # 2xx; 404/405: no models list there; 429: busy but reachable


def probe(p: ProviderConfig, key: str | None, timeout: float) -> Reach:
    url, headers = models_request(p, key)
    try:
        with requests.get(url, headers=headers, timeout=timeout, allow_redirects=False, stream=True) as resp:
            return judge(resp.status_code, p)
    except requests.exceptions.SSLError:
        return Reach(
            False, f"TLS with {host_of(url)} failed (certificate not trusted?); check api_base and SSL_CERT_FILE"
        )
    except (requests.RequestException, OSError, ValueError) as e:
        return Reach(False, describe_transport_error(e, url, timeout))


def probe_all(targets: list[tuple[ProviderConfig, str | None]], deadline: float = PROBE_DEADLINE) -> dict[str, Reach]:
    """Probe every (provider, key) at once; a probe still waiting at the deadline is reported as such."""
    answers: queue.Queue[tuple[str, Reach]] = queue.Queue()
    probed = [(p, key) for p, key in targets if p.kind != REPLAY]
    for p, key in probed:
        worker = threading.Thread(target=lambda p=p, key=key: answers.put((p.name, probe(p, key, deadline))))
        worker.daemon = True  # a probe stuck past the deadline must not hold the exit
        worker.start()
    found: dict[str, Reach] = {}
    end = time.monotonic() + deadline
    while len(found) < len(probed):
        try:
            name, reach = answers.get(timeout=max(0.0, end - time.monotonic()))
        except queue.Empty:
            break
        found[name] = reach
    for p, _ in probed:
        if p.name not in found:
            found[p.name] = Reach(False, f"no answer from {host_of(p.api_base)} within {deadline:g} s; check api_base")
    return found
