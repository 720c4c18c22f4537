"""The ``attach`` backend: measure an engine that is already running, as it is.

Nothing is started or restarted, so the configuration cannot change between trials. Each
trial reads what the server really runs (:mod:`.server_config`: SGLang's ``/server_info``,
vLLM's ``cache_config_info`` labels of ``/metrics``, ``/v1/models``, and the command line
when the server runs on this machine) and keeps it under ``engine.server_config``, with the
parameters that could not be read listed as ``unknown``; the report shows that configuration,
not the tuner's assumed defaults. The parameters looked for are the engine adapter's, by the
engine's own names. Counters are reported as their change over the trial's runs (prefix hits,
queries, preemptions or SGLang's retractions), never the server's lifetime figures.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from slotune.tuner.engines.param import Value
from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.tune.backends.base import Backend, EngineSession, TrialFailed
from slotune.tuner.tune.backends.launch import EndpointSession
from slotune.tuner.tune.backends.server_config import SERVER_CONFIG_KEY, read_server_config

# Keys of a resolved configuration that are no engine parameter.
_IDENTITY_KEYS = ("engine", "model", "gpu")


def engine_param_names(engine: str, model: str, gpu: str) -> tuple[str, ...]:
    """Every parameter of ``engine``, by the names its adapter takes (``config_from_params``).

    Raises:
        ConfigError: an engine slotune does not tune, or an unknown model or GPU id.
    """
    adapter = adapter_for(engine)
    resolved = adapter.resolve(adapter.config_from_params(model, gpu, {}))
    return tuple(k for k in resolved.to_dict() if k not in _IDENTITY_KEYS)


class AttachBackend(Backend):
    """Benchmarks ``url`` (an OpenAI-compatible server with ``/health`` and ``/metrics``)."""

    name = "attach"

    def __init__(self, url: str, *, engine: str, model: str, gpu: str) -> None:
        self.url, self.engine, self.model = url.rstrip("/"), engine, model
        self.params = engine_param_names(engine, model, gpu)

    @contextmanager
    def open(self, config: Mapping[str, Value]) -> Iterator[EngineSession]:
        try:
            healthy = httpx.get(self.url + "/health", timeout=10.0).status_code == 200
        except httpx.HTTPError as e:
            raise TrialFailed(f"cannot reach {self.url}/health ({e}); check --endpoint") from e
        if not healthy:
            raise TrialFailed(f"{self.url}/health did not answer 200; is the engine up?")
        server = read_server_config(self.url, tuple(dict.fromkeys([*config, *self.params])))
        workdir = Path(tempfile.mkdtemp(prefix="slotune-attach-"))
        yield EndpointSession(
            self.url,
            self.engine,
            1.0,
            workdir,
            extra_engine={SERVER_CONFIG_KEY: server.to_dict()},
        )
