"""Pools of replicas: ``NAME:REPLICAS:MODEL:GPU[:CONFIG]`` specs and their engine configs.

CONFIG is either a file holding a ``vllm serve`` command (what ``slotune tune export``
prints; ``#`` lines are skipped) or the flags inline (``long:2:llama-3.1-8b:h100-sxm:--max-num-seqs
64``). The pool's MODEL and GPU win over a model named in the command.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

from slotune.collector.errors import ConfigError, SlotuneError
from slotune.collector.textfile import read_text
from slotune.tuner.sim import EngineConfig, EngineCore, ResolvedConfig, parse_engine_flags, resolve

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """A pool: ``replicas`` identical replicas of one engine configuration."""

    name: str
    replicas: int
    config: EngineConfig

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def gpu(self) -> str:
        return self.config.gpu

    def resolved(self) -> ResolvedConfig:
        """The configuration with the engine's defaults, validated like the engine.

        Raises:
            ConfigError: the configuration does not start (naming the pool), e.g. a model
                that does not fit its GPU.
        """
        try:
            config = resolve(self.config)
            EngineCore.create(config)
        except SlotuneError as e:
            raise ConfigError(f"--pool {self.name}: {e}") from None
        return config

    @property
    def gpus_per_replica(self) -> int:
        return EngineCore.create(self.resolved()).view.tensor_parallel_size


def parse_pool(text: str, *, engine: str = "vllm") -> PoolSpec:
    """Parse ``NAME:REPLICAS:MODEL:GPU[:CONFIG]``.

    Raises:
        ConfigError: a missing part, a bad count or name, or an engine flag the engine refuses.
    """
    parts = text.split(":", 4)
    if len(parts) < 4:
        raise ConfigError(f"--pool {text!r}: use NAME:REPLICAS:MODEL:GPU[:CONFIG]")
    name, count, model, gpu = parts[:4]
    if not _NAME.match(name):
        raise ConfigError(f"--pool {text!r}: pool name {name!r} should be letters, digits, -_.")
    try:
        replicas = int(count)
    except ValueError:
        replicas = -1
    if replicas < 0:
        raise ConfigError(f"--pool {name}: REPLICAS {count!r} should be a whole number >= 0")
    argv = _config_argv(parts[4]) if len(parts) == 5 else []
    try:
        config = parse_engine_flags(argv, engine=engine, model=model, gpu=gpu)
        # the pool's model and GPU, not the one a copied command names
        spec = PoolSpec(name, replicas, replace(config, model=model, gpu=gpu))
        spec.resolved()
    except SlotuneError as e:
        if len(parts) == 5 and Path(parts[4]).is_file():  # name the file the flags came from
            raise ConfigError(f"{parts[4]}: {e}") from None
        raise ConfigError(f"--pool {name}: {e}") from None
    return spec


def _config_argv(config: str) -> list[str]:
    path = Path(config)
    is_file = path.exists()
    shown = config if len(config) <= 120 else f"{config[:120]}..."
    text = read_text(path, "pool configuration") if is_file else config
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    try:
        argv = shlex.split(" ".join(line.rstrip("\\") for line in lines))
    except ValueError as e:  # an unclosed quote
        raise ConfigError(f"{shown}: not engine flags ({e})") from None
    if argv[:2] == ["vllm", "serve"]:
        argv = argv[2:]
        if argv and not argv[0].startswith("-"):
            argv = argv[1:]  # the served model: the pool names its own
    # A path that is not there reads as text: it must not pass for an empty configuration.
    if (argv and not argv[0].startswith("-")) or (is_file and not argv):
        raise ConfigError(
            f"{shown}: neither a file of engine flags nor flags (e.g. --max-num-seqs 64)"
        )
    return argv


def check_unique(pools: list[PoolSpec]) -> None:
    """Raises ConfigError when two pools share a name, or no pool has a replica.

    A pool may start with 0 replicas: the autoscaler can grow it.
    """
    names = [p.name for p in pools]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"--pool {name} is given twice; give each pool its own name")
    if not pools:
        raise ConfigError("give at least one --pool NAME:REPLICAS:MODEL:GPU")
    if not sum(p.replicas for p in pools):
        raise ConfigError("every --pool has 0 replicas; start at least one")


def pool_from_study(study: str, url: str | None, name: str | None = None) -> PoolSpec:
    """A one-replica pool running a study's best configuration (``--study NAME``).

    Raises:
        ConfigError: no such study, or none of its configurations met every SLO.
    """
    from slotune.tuner.sim import config_from_params
    from slotune.tuner.tune.run import show_study

    report = show_study(study, url)
    best = report.best
    if best is None:
        raise ConfigError(
            f"--study {study}: no configuration met every SLO; run more trials or relax the SLOs"
        )
    config = config_from_params(report.engine, report.model, report.gpu, best.config)
    spec = PoolSpec(name or study, 1, config)
    spec.resolved()
    return spec
