"""The ``attach`` backend: measure an engine that is already running, as it is.

Nothing is started or restarted, so the configuration cannot change between trials: the
study's ``config`` records what the operator says the endpoint runs (fixed ``--param``
values), and the objective (typically ``capacity``) is that deployment's.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from slotune.tuner.backends.base import Backend, EngineSession, TrialFailed
from slotune.tuner.backends.launch import EndpointSession
from slotune.tuner.space import Value


class AttachBackend(Backend):
    """Benchmarks ``url`` (an OpenAI-compatible server with ``/health`` and ``/metrics``)."""

    name = "attach"

    def __init__(self, url: str, *, engine: str, model: str) -> None:
        self.url, self.engine, self.model = url.rstrip("/"), engine, model

    @contextmanager
    def open(self, config: Mapping[str, Value]) -> Iterator[EngineSession]:
        try:
            healthy = httpx.get(self.url + "/health", timeout=10.0).status_code == 200
        except httpx.HTTPError as e:
            raise TrialFailed(f"cannot reach {self.url}/health ({e}); check --endpoint") from e
        if not healthy:
            raise TrialFailed(f"{self.url}/health did not answer 200; is the engine up?")
        workdir = Path(tempfile.mkdtemp(prefix="slotune-attach-"))
        yield EndpointSession(self.url, self.engine, 1.0, workdir)
