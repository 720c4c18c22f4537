"""The ``attach`` backend: measure an engine that is already running, as it is.

Nothing is started or restarted, so the configuration cannot change between trials. Each
trial reads what the server really runs (:mod:`.server_config`: ``/v1/models``, the
``vllm:cache_config_info`` labels of ``/metrics``, and the command line when the server runs on
this machine) and keeps it under ``engine.server_config``, with the parameters that could not
be read listed as ``unknown``; the report shows that configuration, not the tuner's assumed
defaults. Counters are reported as their change over the trial's runs (prefix hits, queries,
preemptions), never the server's lifetime figures.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from slotune.tuner.backends.base import Backend, EngineSession, TrialFailed
from slotune.tuner.backends.launch import EndpointSession
from slotune.tuner.backends.server_config import SERVER_CONFIG_KEY, read_server_config
from slotune.tuner.sim.config import VllmConfig
from slotune.tuner.space import Value

_VLLM_PARAMS = tuple(
    f.name for f in dataclasses.fields(VllmConfig) if f.name not in ("model", "gpu")
)


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
        params = _VLLM_PARAMS if self.engine == "vllm" else ()
        server = read_server_config(self.url, params)
        workdir = Path(tempfile.mkdtemp(prefix="slotune-attach-"))
        yield EndpointSession(
            self.url,
            self.engine,
            1.0,
            workdir,
            extra_engine={SERVER_CONFIG_KEY: server.to_dict()},
        )
