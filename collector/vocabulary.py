"""The product's vocabulary: the kinds every layer names, free of dependencies.

The CLI imports these enums at start-up (Typer takes an Enum as a choice), so this module
imports nothing but the standard library. Each enum has one home here; the modules that
act on a kind import it from here instead of spelling the values again. A kind's traits
(whether a source kind is an engine, its default paths) sit beside its member, so adding a
member is one member line and one traits line in this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal


def choices(enum: type[StrEnum]) -> str:
    """The values of ``enum`` for a help text or an error message (``vllm | trtllm``)."""
    return " | ".join(m.value for m in enum)


class Endpoint(StrEnum):
    """The OpenAI-compatible API a load run calls."""

    COMPLETIONS = "completions"
    CHAT = "chat"

    @property
    def path(self) -> str:
        return "/v1/completions" if self is Endpoint.COMPLETIONS else "/v1/chat/completions"


class Engine(StrEnum):
    """The serving engines slotune models and tunes (one enum for the whole product)."""

    VLLM = "vllm"
    TRTLLM = "trtllm"
    SGLANG = "sglang"


DEFAULT_ENGINE: Final = Engine.VLLM
"""The engine a command or a call means when it names none."""


@dataclass(frozen=True, slots=True)
class SourceTraits:
    """What the layers above the agent know of a source kind without loading its source.

    Attributes:
        is_engine: an inference engine (serves ``/v1/models``, its scrape feeds a trial).
        is_gpu: reads a node's GPU counters (utilisation, memory, profiling ratios).
        default_paths: paths appended to a base URL when the user gave no explicit path.
        federate_prefix: the metric-name prefix that tells this kind's series apart in a
            Prometheus' ``/federate`` output; empty for a kind that is never federated.
    """

    is_engine: bool
    is_gpu: bool
    default_paths: tuple[str, ...]
    federate_prefix: str = ""


class SourceKind(StrEnum):
    """The kinds of target the agent can scrape."""

    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"
    DCGM = "dcgm"
    NVML = "nvml"
    PROMETHEUS = "prometheus"  # an existing Prometheus' /federate, many targets through one

    @property
    def traits(self) -> SourceTraits:
        return _SOURCE_TRAITS[self]

    @property
    def is_engine(self) -> bool:
        """Whether the target is an inference engine (serves ``/v1/models``)."""
        return self.traits.is_engine

    @property
    def is_gpu(self) -> bool:
        """Whether the target reads a node's GPU counters (DCGM exporter, NVML)."""
        return self.traits.is_gpu

    @property
    def default_paths(self) -> tuple[str, ...]:
        """Paths appended to a base URL when the user gave no explicit path."""
        return self.traits.default_paths

    @property
    def needs_url(self) -> bool:
        """Whether a target of this kind is a URL (NVML reads the local library)."""
        return bool(self.traits.default_paths)

    @property
    def federate_prefix(self) -> str:
        """The metric-name prefix of this kind's series (empty: never federated)."""
        return self.traits.federate_prefix


_SOURCE_TRAITS: dict[SourceKind, SourceTraits] = {
    SourceKind.VLLM: SourceTraits(True, False, ("/metrics",), "vllm:"),
    SourceKind.SGLANG: SourceTraits(True, False, ("/metrics",), "sglang:"),
    # the JSON iteration stats and the Prometheus text
    SourceKind.TRTLLM: SourceTraits(True, False, ("/metrics", "/prometheus/metrics"), "trtllm_"),
    SourceKind.DCGM: SourceTraits(False, True, ("/metrics",), "DCGM_FI_"),
    SourceKind.NVML: SourceTraits(False, True, ()),  # the local library, no URL
    SourceKind.PROMETHEUS: SourceTraits(False, False, ("/federate",)),
}


def engine_kinds() -> tuple[SourceKind, ...]:
    """The source kinds that are inference engines, in declaration order."""
    return tuple(k for k in SourceKind if k.is_engine)


class BackendKind(StrEnum):
    """Where a study's trials run."""

    SIM = "sim"  # the in-process simulator
    LAUNCH = "launch"  # one engine process per trial, from a command template
    ATTACH = "attach"  # an engine already running, measured as it is


class ObjectiveKind(StrEnum):
    """What a trial maximises (:mod:`tuner.tune.objectives` says how each is measured)."""

    CAPACITY = "capacity"
    GOODPUT = "goodput"
    THROUGHPUT = "throughput"
    PARETO = "pareto"

    @property
    def directions(self) -> list[Literal["maximize", "minimize"]]:
        """Optuna's study directions, one per value (``maximize`` / ``minimize``)."""
        if self is ObjectiveKind.PARETO:
            return ["maximize", "minimize"]
        return ["maximize"]

    @property
    def value_names(self) -> list[str]:
        """Names of the values, as the run summary names them (``capacity``: req/s)."""
        return {
            ObjectiveKind.CAPACITY: ["capacity"],
            ObjectiveKind.GOODPUT: ["goodput"],
            ObjectiveKind.THROUGHPUT: ["output_token_throughput"],
            ObjectiveKind.PARETO: ["output_token_throughput", "ttft_ms.p99"],
        }[self]

    @property
    def failed_values(self) -> tuple[float, ...]:
        """Values recorded for a configuration that did not run (worst possible)."""
        return (0.0, float("inf")) if self is ObjectiveKind.PARETO else (0.0,)


class PolicyKind(StrEnum):
    """The fleet's routing policies (``tuner.fleet.registry`` builds each from its spec)."""

    ROUND_ROBIN = "round-robin"
    LEAST_REQUESTS = "least-requests"
    LEAST_KV = "least-kv"
    LENGTH_POOLS = "length-pools"
    PREFIX_AFFINITY = "prefix-affinity"
    SCORE = "score"
    SLO_AWARE = "slo-aware"  # admission on top of another policy


class SamplerKind(StrEnum):
    """The samplers a study can use (``benchmarks/tuner_efficiency.py`` compares them)."""

    TPE = "tpe"  # slotune's DistinctTPESampler (Optuna's multivariate TPE for ``pareto``)
    OPTUNA_TPE = "optuna-tpe"  # Optuna's TPE as it is
    GP = "gp"
    RANDOM = "random"
