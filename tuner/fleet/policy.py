"""The one interface every routing policy implements, for the fleet simulator and the proxy.

A policy sees a request's features and a snapshot of every replica's load, and names the
replica to send it to, or sheds it. It never blocks and never does I/O: the simulator calls it
on its own clock and the proxy on the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a router knows about a request before it starts."""

    request_id: str
    model: str
    input_tokens: int
    # max_tokens when the client gave one, else a per-model / per-client running quantile
    expected_output_tokens: float
    max_tokens: int | None = None
    # ids of the prompt's prefix blocks, in order (hash_ids in traces, block hashes live)
    prefix_hashes: tuple[int, ...] = ()
    session_id: str | None = None
    client_key: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One replica's load as the router sees it (live from /metrics, or from the simulator)."""

    name: str
    pool: str
    model: str
    num_running: int = 0
    num_waiting: int = 0
    kv_usage: float = 0.0
    healthy: bool = True
    # tokens per second the replica is completing now (for predicted queueing delay)
    throughput_tps: float = 0.0
    # prompt tokens queued behind the running batch (0 = unknown: num_waiting stands in)
    num_waiting_tokens: int = 0
    # prompt tokens per second the replica computes while it has a queue (0 = unknown)
    prefill_tps: float = 0.0
    # requests per second the replica has lately taken from its queue (0 = unknown)
    start_rate_rps: float = 0.0
    # tokens its KV cache holds in all (0 = unknown)
    kv_capacity_tokens: int = 0

    @property
    def load(self) -> int:
        """Requests the replica holds (running + waiting): what least-requests balances."""
        return self.num_running + self.num_waiting


@dataclass(frozen=True, slots=True)
class Decision:
    """Where a request goes: a replica name, or shed with the reason (HTTP 429 in the proxy)."""

    replica: str | None
    shed_reason: str = ""
    retry_after_s: float = 0.0

    @property
    def shed(self) -> bool:
        return self.replica is None


class RoutingPolicy(Protocol):
    """A routing policy: `choose` must be pure with respect to I/O and fast (µs)."""

    name: str

    def choose(self, request: RequestInfo, replicas: Sequence[ReplicaState]) -> Decision:
        """Pick a replica among `replicas` (already filtered to healthy ones serving the model)."""
        ...

    def on_finish(self, request: RequestInfo, replica: str, output_tokens: int) -> None:
        """Learn from a finished request (e.g. output-length quantiles, prefix ownership)."""
        ...
