"""The simulated engine core: schedule -> price the step -> apply it, one step per call.

:class:`EngineCore` is what the emulated HTTP engine drives in real time and what
:func:`tuner.sim.simulator.simulate` drives as fast as it can. It owns the scheduler, the
KV blocks sized by the memory model and the cost model that prices each step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slotune.tuner.engines.base import EngineConfig, ResolvedConfig
from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.sim.block_manager import BlockManager
from slotune.tuner.sim.cost import CostModel, StepShape, StepTime
from slotune.tuner.sim.cost_coeffs import OverheadKnobs
from slotune.tuner.sim.memory import KvCapacity, kv_room_warning
from slotune.tuner.sim.request import RequestRejected, RequestState, SimRequest, prefix_block_hashes
from slotune.tuner.sim.scheduler import Scheduler
from slotune.tuner.sim.view import PrefixCache, SimView


@dataclass(frozen=True, slots=True)
class StepResult:
    """One engine step.

    Attributes:
        duration_s: the step's time on the emulated GPU.
        time: the step's time split (compute, memory, communication, overhead); None when
            the step ran with ``with_split=False``.
        tokens: (request id, tokens) sampled this step; a finished prefill emits the
            first token.
        finished: requests that produced their last token this step.
        preempted: requests preempted (KV freed, recomputed later) this step.
        started: requests scheduled for the first time this step.
        num_prefill_tokens: prompt (or recomputed) tokens computed this step.
        num_decode_tokens: tokens decoded this step (one per decoding request).
        num_prefill_seqs: requests with a prefill chunk this step.
        started_cached_tokens: for each of ``started``, its prompt tokens found in the
            prefix cache.
    """

    duration_s: float
    time: StepTime | None
    tokens: list[tuple[str, int]]
    finished: list[str]
    preempted: list[str]
    started: list[str]
    num_prefill_tokens: int
    num_decode_tokens: int
    num_prefill_seqs: int
    started_cached_tokens: tuple[int, ...] = ()

    @property
    def num_scheduled_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decode_tokens


@dataclass(frozen=True, slots=True)
class DecodeRun:
    """Several identical pure-decode steps applied at once (see ``Scheduler.advance_decode``).

    Every request in ``request_ids`` got one token at the end of each step; ``finished``
    produced their last one in the last step. ``first_time`` is the first step's split
    when asked for.
    """

    durations_s: list[float]
    request_ids: list[str]
    finished: list[str]
    first_time: StepTime | None


@dataclass(frozen=True, slots=True)
class EngineStats:
    """Gauges and cumulative counters of an engine core (tokens count prompt tokens)."""

    requests_running: int
    requests_waiting: int
    kv_usage: float
    prefix_queries: int
    prefix_hits: int
    preemptions: int
    prompt_tokens: int
    generation_tokens: int
    kv_blocks: int
    kv_tokens: int
    num_steps: int
    last_step_tokens: int

    @property
    def num_running(self) -> int:
        """Former name of ``requests_running`` (the store's name), kept for callers."""
        return self.requests_running

    @property
    def num_waiting(self) -> int:
        """Former name of ``requests_waiting`` (the store's name), kept for callers."""
        return self.requests_waiting


class EngineCore:
    """A simulated serving engine; build one with :meth:`create`.

    What the engine is comes from its adapter: the scheduler, and the neutral view
    (``self.view``) of its limits the core and its callers read.
    """

    def __init__(self, config: ResolvedConfig, capacity: KvCapacity, cost: CostModel) -> None:
        self.config = config
        self.capacity = capacity
        self.cost = cost
        self._adapter = adapter_for(config.engine)
        self.view = self._adapter.sim_view(config, capacity)
        self._max_len = self.view.max_len
        self.block_manager = BlockManager(
            capacity.num_blocks,
            self.view.block_size,
            enable_caching=self.view.prefix_cache is not PrefixCache.NONE,
        )
        self.scheduler: Scheduler = self._adapter.scheduler(config, self.view, self.block_manager)
        self._states: dict[str, RequestState] = {}
        self._prompt_tokens = 0
        self._generation_tokens = 0
        self._num_steps = 0
        self._last_step_tokens = 0

    @classmethod
    def create(cls, config: EngineConfig | ResolvedConfig) -> EngineCore:
        """Validate a config, size the KV cache and build the core.

        Raises:
            ConfigError: unknown model or GPU id.
            EngineConfigError: the engine would refuse to start (bad combination, weights
                that do not fit, no room for one ``max_model_len`` sequence).
        """
        adapter = adapter_for(config.engine)
        resolved = config if isinstance(config, ResolvedConfig) else adapter.resolve(config)
        capacity = adapter.kv_capacity(resolved)
        view = adapter.sim_view(resolved, capacity)
        return cls(resolved, capacity, _cost_model(resolved, view, adapter.host_step_s))

    # requests
    def add_request(self, request: SimRequest) -> None:
        """Queue a request.

        Raises:
            RequestRejected: duplicate id, or too long for the engine (a real server
                answers HTTP 400 and keeps serving).
        """
        if request.request_id in self._states:
            raise RequestRejected(f"request id {request.request_id!r} is already in the engine")
        self._check_length(request)
        bm = self.block_manager
        hashes = prefix_block_hashes(request, bm.block_size) if bm.enable_caching else []
        state = RequestState(request=request, block_hashes=hashes)
        self._states[request.request_id] = state
        self.scheduler.add(state)

    def abort(self, request_id: str) -> bool:
        """Drop a request (client went away); False if the engine does not hold it."""
        if self._states.pop(request_id, None) is None:
            return False
        self.scheduler.abort(request_id)
        return True

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    # one step
    def step(self, *, with_split: bool = True) -> StepResult | None:
        """Run one scheduler step; None when there is nothing to run.

        Args:
            with_split: also price the step's compute / memory / overhead split (slower).
        """
        if not self.scheduler.has_unfinished():
            return None
        batch = self.scheduler.schedule()
        while not batch.scheduled and batch.preempted:
            # A request preempted itself and nothing else ran (vLLM's empty step, no forward
            # pass): schedule again with the freed blocks.
            preempted = batch.preempted
            batch = self.scheduler.schedule()
            batch.preempted[:0] = preempted
        if not batch.scheduled:
            return None
        shape = (
            batch.num_prefill_tokens,
            batch.prefill_attention_work,
            batch.num_decode_seqs,
            batch.decode_context_tokens,
            batch.num_prefill_seqs,
        )
        time = self.cost.step_time(StepShape(*shape)) if with_split else None
        duration_s = time.total_s if time is not None else self.cost.step_time_s(*shape)
        outcome = self.scheduler.update(batch)
        for state, _ in batch.scheduled:
            if state.num_output_tokens == 1 and state.num_computed_tokens == state.num_tokens - 1:
                self._prompt_tokens += state.request.prompt_tokens
        self._generation_tokens += len(outcome.tokens)
        for state in outcome.finished:
            del self._states[state.request_id]
        self._num_steps += 1
        self._last_step_tokens = batch.num_scheduled_tokens
        return StepResult(
            duration_s=duration_s,
            time=time,
            tokens=outcome.tokens,
            finished=[s.request_id for s in outcome.finished],
            preempted=[s.request_id for s in batch.preempted],
            started=[s.request_id for s in batch.started],
            num_prefill_tokens=batch.num_prefill_tokens,
            num_decode_tokens=batch.num_decode_seqs,
            num_prefill_seqs=batch.num_prefill_seqs,
            started_cached_tokens=tuple(s.num_cached_tokens for s in batch.started),
        )

    def decode_run(
        self, max_steps: int, max_start_s: float, *, with_split: bool = True
    ) -> DecodeRun | None:
        """Apply the next identical pure-decode steps at once, if there are at least two.

        Args:
            max_steps: most steps to apply.
            max_start_s: only steps starting before this many seconds from now (the next
                arrival) are applied.
            with_split: also price the first step's split.
        """
        scheduler = self.scheduler
        num_steps = scheduler.decode_run_length(max_steps)
        if num_steps < 2:
            return None
        running = scheduler.running
        n = len(running)
        context = sum(s.num_computed_tokens + 1 for s in running)
        durations = self._decode_durations(n, context, num_steps, max_start_s)
        k = len(durations)
        if k < 2:
            return None
        first = (
            self.cost.step_time(StepShape(num_decode_seqs=n, decode_context_tokens=context))
            if with_split
            else None
        )
        ids = [s.request_id for s in running]
        finished = [s.request_id for s in scheduler.advance_decode(k)]
        for request_id in finished:
            del self._states[request_id]
        self._generation_tokens += k * n
        self._num_steps += k
        self._last_step_tokens = n
        return DecodeRun(durations, ids, finished, first)

    def _decode_durations(
        self, n: int, context: int, num_steps: int, max_start_s: float
    ) -> list[float]:
        """Durations of consecutive decode steps of ``n`` requests, cut at ``max_start_s``."""
        f = self.cost.step_time_s
        d0 = f(0, 0.0, n, context, 0)
        slope = f(0, 0.0, n, context + n, 0) - d0
        last = f(0, 0.0, n, context + (num_steps - 1) * n, 0)
        # Step time is linear in the context read: no need to price every step.
        is_linear = abs(d0 + slope * (num_steps - 1) - last) <= 1e-9 * last
        durations: list[float] = []
        elapsed = 0.0
        for i in range(num_steps):
            if elapsed >= max_start_s:
                break
            d = d0 + slope * i if is_linear else f(0, 0.0, n, context + i * n, 0)
            durations.append(d)
            elapsed += d
        return durations

    # observation
    @property
    def stats(self) -> EngineStats:
        bm = self.block_manager
        return EngineStats(
            requests_running=len(self.scheduler.running),
            requests_waiting=len(self.scheduler.waiting),
            kv_usage=bm.usage,
            prefix_queries=bm.prefix_queries,
            prefix_hits=bm.prefix_hits,
            preemptions=self.scheduler.num_preemptions,
            prompt_tokens=self._prompt_tokens,
            generation_tokens=self._generation_tokens,
            kv_blocks=self.capacity.num_blocks,
            kv_tokens=self.capacity.num_blocks * bm.block_size,
            num_steps=self._num_steps,
            last_step_tokens=self._last_step_tokens,
        )

    def kv_log_lines(self) -> list[str]:
        """The KV-cache lines the engine logs at start, in its own wording."""
        return self._adapter.kv_log_lines(self.capacity, self._max_len)

    def kv_room_warning(self, tokens_per_request: float, what: str) -> str | None:
        """A warning when fewer than a few such requests fit in the KV cache at once."""
        tokens = min(tokens_per_request, self._max_len)
        return kv_room_warning(self.capacity, tokens, what, self._adapter.kv_room_knobs)

    def _check_length(self, request: SimRequest) -> None:
        total = request.prompt_tokens + request.max_tokens
        if total > self._max_len:
            raise RequestRejected(
                f"This model's maximum context length is {self._max_len} tokens. However, you "
                f"requested {total} tokens ({request.prompt_tokens} in the messages, "
                f"{request.max_tokens} in the completion). Please reduce the length of the "
                "messages or completion."
            )
        self._adapter.check_request(self.config, self.capacity, request)


def _cost_model(
    config: ResolvedConfig, view: SimView, host_step_s: Callable[[OverheadKnobs], float]
) -> CostModel:
    return CostModel(
        config.model,
        config.gpu,
        tensor_parallel_size=view.tensor_parallel_size,
        kv_cache_dtype=view.kv_cache_dtype,
        quantization=view.quantization,
        overlaps_host=view.overlaps_host,
        enforce_eager=view.enforce_eager,
        host_step_s=host_step_s,
    )
