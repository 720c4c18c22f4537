"""What one benchmark run does: server, workload, arrivals, size, SLOs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from slotune.collector.bench.arrivals import ArrivalKind, ArrivalSpec
from slotune.collector.bench.client import Endpoint, normalize_base_url
from slotune.collector.errors import ConfigError
from slotune.collector.redact import redact_url
from slotune.collector.slo import SLO

DEFAULT_NUM_REQUESTS = 100


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """A benchmark run's settings (the tuner builds these too).

    Attributes:
        url: server root, e.g. ``http://127.0.0.1:8000``.
        arrival: the arrival process.
        model: model name; None = the first one ``/v1/models`` lists.
        endpoint: completions or chat.
        workload: a bundled trace name; or
        trace_file: a trace file; or
        input_len / output_len: synthetic length specs (collector.workload.synthetic).
        shared_prefix_tokens: shared system prompt (synthetic workloads and sessions).
        turns: requests per conversation (synthetic workloads).
        num_requests: measured requests (default 100; the whole trace with trace timing).
        duration_s: instead of a count, measure what the arrival process sends in this time.
        warmup: requests sent first and left out of the results.
        cooldown: keep the load on after the measured requests are sent, until they finish,
            so the last ones see the same load as the first; those requests are left out
            and the ones still in flight when the last measured one ends are cancelled.
            Off by default: a run sends exactly ``warmup + num_requests`` requests.
        slos: SLOs for goodput and attainment.
        seed: seed of lengths, prompts and arrival times.
        timeout_s: per-request limit.
        api_key: bearer token (never stored, printed or logged).
        tokenizer: local Hugging Face tokenizer directory for exact prompt lengths.
        stream: stream responses (SSE) or not.
        ignore_eos: send ``ignore_eos``/``min_tokens`` so outputs have the asked length.
        name: run name in the store.
    """

    url: str
    arrival: ArrivalSpec
    model: str | None = None
    endpoint: Endpoint = Endpoint.COMPLETIONS
    workload: str | None = None
    trace_file: str | None = None
    input_len: str | None = None
    output_len: str | None = None
    shared_prefix_tokens: int = 0
    turns: int = 1
    num_requests: int | None = None
    duration_s: float | None = None
    warmup: int = 0
    cooldown: bool = False
    slos: tuple[SLO, ...] = ()
    seed: int = 0
    timeout_s: float = 600.0
    api_key: str | None = field(default=None, repr=False)
    tokenizer: str | None = None
    stream: bool = True
    ignore_eos: bool = True
    name: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", normalize_base_url(self.url))
        object.__setattr__(self, "endpoint", Endpoint(self.endpoint))
        object.__setattr__(self, "slos", tuple(self.slos))
        sources = [
            self.workload is not None,
            self.trace_file is not None,
            self.input_len is not None or self.output_len is not None,
        ]
        if sum(sources) != 1:
            raise ConfigError(
                "give exactly one workload: --workload NAME, --trace FILE, or "
                "--input-len SPEC --output-len SPEC"
            )
        if sources[2] and (self.input_len is None or self.output_len is None):
            raise ConfigError("a synthetic workload needs both --input-len and --output-len")
        if (self.shared_prefix_tokens or self.turns != 1) and not sources[2]:
            raise ConfigError(
                "--shared-prefix and --turns apply to synthetic workloads "
                "(--input-len/--output-len); traces carry their own sharing"
            )
        if self.arrival.kind is ArrivalKind.TRACE and sources[2]:
            raise ConfigError(
                "--trace-timing needs --workload or --trace: synthetic "
                "workloads have no timestamps; use --rate"
            )
        if self.num_requests is not None and self.duration_s is not None:
            raise ConfigError("give --num-requests or --duration, not both")
        if self.num_requests is not None and self.num_requests < 1:
            raise ConfigError("--num-requests must be at least 1")
        if self.duration_s is not None and not self.duration_s > 0:
            raise ConfigError("--duration must be above zero seconds")
        if (
            self.duration_s is not None
            and self.arrival.rate is not None
            and math.isinf(self.arrival.rate)
        ):
            raise ConfigError("--rate inf needs --num-requests, not --duration")
        if self.warmup < 0:
            raise ConfigError("--warmup must be zero or more requests")
        if not self.timeout_s > 0:
            raise ConfigError("--timeout must be above zero seconds")

    @property
    def workload_name(self) -> str:
        if self.workload is not None:
            return self.workload
        if self.trace_file is not None:
            return str(self.trace_file)
        name = f"synthetic in={self.input_len} out={self.output_len}"
        if self.shared_prefix_tokens:
            name += f" prefix={self.shared_prefix_tokens}"
        return name + (f" turns={self.turns}" if self.turns > 1 else "")

    def with_rate(self, rate: float) -> BenchConfig:
        """The same run at another open-loop rate (keeps the burstiness)."""
        arrival = ArrivalSpec.from_rate(rate, self.arrival.burstiness)
        return replace(self, arrival=arrival)

    def to_dict(self) -> dict[str, Any]:
        """Settings as JSON, without the API key."""
        a = self.arrival
        return {
            "url": redact_url(self.url),
            "model": self.model,
            "endpoint": self.endpoint.value,
            "workload": self.workload,
            "trace_file": self.trace_file,
            "input_len": self.input_len,
            "output_len": self.output_len,
            "shared_prefix_tokens": self.shared_prefix_tokens,
            "turns": self.turns,
            "arrival": {
                "kind": a.kind.value,
                "rate": "inf" if a.rate is not None and math.isinf(a.rate) else a.rate,
                "burstiness": a.burstiness,
                "concurrency": a.concurrency,
                "time_scale": a.time_scale,
            },
            "num_requests": self.num_requests,
            "duration_s": self.duration_s,
            "warmup": self.warmup,
            "cooldown": self.cooldown,
            "slos": [s.spec for s in self.slos],
            "seed": self.seed,
            "timeout_s": self.timeout_s,
            "tokenizer": self.tokenizer,
            "stream": self.stream,
            "ignore_eos": self.ignore_eos,
            "api_key_set": self.api_key is not None,
        }
