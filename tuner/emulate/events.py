"""What the real-time loop reports to metrics exporters and the timings file."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from slotune.tuner.sim.engine import EngineStats


class FinishReason(StrEnum):
    """Why a request left the engine (vLLM's ``finished_reason`` label values)."""

    LENGTH = "length"
    STOP = "stop"
    ABORT = "abort"


@dataclass(frozen=True, slots=True)
class StepReport:
    """One scheduler step as the server saw it in real time.

    Attributes:
        index: step number since start (TensorRT-LLM's ``iter``).
        duration_s: real seconds the step occupied (emulated duration / time scale).
        counters: the core's gauges and counters after the step.
        prompt_tokens: prompt tokens computed in this step (prefix-cache hits excluded).
        generation_tokens: output tokens produced in this step.
        preemptions: requests preempted in this step.
        prefix_queries: prompt tokens looked up in the prefix cache in this step.
        prefix_hits: of those, tokens found in the cache.
        new_requests_queue_s: for requests scheduled for the first time in this step,
            seconds from arrival to the start of this step.
        num_context_requests: requests whose first token came out of this step.
        num_generation_requests: requests that decoded a further token in this step.
        num_completed: requests that finished in this step.
        ttfts_s: time to first token of requests whose first token came out of this step.
        itls_s: for every other request with output, seconds since its previous output.
        lag_s: real seconds the step ended after its deadline (:mod:`.lag`).
        is_late: whether that lag makes the step late (a visibly longer token gap).
    """

    index: int
    duration_s: float
    counters: EngineStats
    prompt_tokens: int
    generation_tokens: int
    preemptions: int
    prefix_queries: int
    prefix_hits: int
    new_requests_queue_s: tuple[float, ...]
    num_context_requests: int
    num_generation_requests: int
    num_completed: int
    ttfts_s: tuple[float, ...]
    itls_s: tuple[float, ...]
    lag_s: float = 0.0
    is_late: bool = False


@dataclass(frozen=True, slots=True)
class WireTimes:
    """When the server wrote a streamed request's output to its socket (``time.time()``).

    Attributes:
        token_times_s: for each output token, when the chunk carrying it was written.
        end_s: when the end of the stream (``[DONE]``) was written, or the stream was cut.
    """

    token_times_s: tuple[float, ...]
    end_s: float


@dataclass(frozen=True, slots=True)
class FinishedRequest:
    """A request that left the engine, with its server-side timeline.

    Times are ``time.time()`` seconds. ``first_scheduled_s`` is the start of the first step
    that worked on the request; it is None (like the token times) for a request aborted
    before it was scheduled. ``token_times_s`` are the ends of the steps that produced the
    tokens (what the metrics observe, as vLLM observes its engine's outputs); ``wire``, for a
    streamed request, says when each token was written to the client. ``preemptions``
    counts the times it was preempted; ``cached_tokens`` its prompt tokens found in the
    prefix cache when it was first scheduled.
    """

    request_id: str
    timing_id: str
    finish_reason: FinishReason
    prompt_tokens: int
    max_tokens: int
    arrival_s: float
    first_scheduled_s: float | None
    first_token_s: float | None
    token_times_s: tuple[float, ...]
    end_s: float
    wire: WireTimes | None = None
    preemptions: int = 0
    cached_tokens: int = 0

    @property
    def completion_tokens(self) -> int:
        return len(self.token_times_s)

    @property
    def e2e_s(self) -> float:
        return self.end_s - self.arrival_s

    @property
    def queue_s(self) -> float:
        start = self.first_scheduled_s if self.first_scheduled_s is not None else self.end_s
        return start - self.arrival_s

    @property
    def prefill_s(self) -> float:
        if self.first_scheduled_s is None or self.first_token_s is None:
            return 0.0
        return self.first_token_s - self.first_scheduled_s

    @property
    def decode_s(self) -> float:
        if self.first_token_s is None:
            return 0.0
        return self.token_times_s[-1] - self.first_token_s

    @property
    def inference_s(self) -> float:
        return self.prefill_s + self.decode_s

    @property
    def mean_tpot_s(self) -> float:
        """vLLM's per-request time per output token: decode time over tokens after the first."""
        if self.completion_tokens < 2:
            return 0.0
        return self.decode_s / (self.completion_tokens - 1)

    def to_timing_line(self) -> dict[str, object]:
        """The ``--timings-file`` JSON object: token times as written to the client if known."""
        token_times_s = self.wire.token_times_s if self.wire else self.token_times_s
        return {
            "request_id": self.timing_id,
            "arrival_s": self.arrival_s,
            "first_token_s": token_times_s[0] if token_times_s else None,
            "token_times_s": list(token_times_s),
            "end_s": self.wire.end_s if self.wire else self.end_s,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": len(token_times_s),
            "finish_reason": self.finish_reason.value,
        }
