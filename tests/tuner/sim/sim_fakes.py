"""A linear cost model and a hand-sized KV cache, so scheduler tests control every number."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from slotune.tuner.sim.config import ResolvedConfig, TrtllmConfig, VllmConfig, resolve
from slotune.tuner.sim.cost import StepShape, StepTime
from slotune.tuner.sim.engine import EngineCore, StepResult
from slotune.tuner.sim.memory import KvCapacity
from slotune.tuner.sim.request import SimRequest


class LinearCost:
    """1 ms per step + 10 µs per token + attention terms: simple, linear, deterministic."""

    def step_time_s(
        self,
        num_prefill_tokens: int,
        prefill_attention_work: float,
        num_decode_seqs: int,
        decode_context_tokens: int,
        num_prefill_seqs: int = 0,
    ) -> float:
        return self.step_time(
            StepShape(
                num_prefill_tokens,
                prefill_attention_work,
                num_decode_seqs,
                decode_context_tokens,
                num_prefill_seqs,
            )
        ).total_s

    def step_time(self, shape: StepShape) -> StepTime:
        tokens = shape.num_prefill_tokens + shape.num_decode_seqs
        compute = 1e-5 * tokens + 1e-9 * shape.prefill_attention_work
        memory = 2e-8 * shape.decode_context_tokens
        overhead = 1e-3
        return StepTime(compute + memory + overhead, compute, memory, overhead)


def fake_capacity(num_blocks: int, block_size: int) -> KvCapacity:
    return KvCapacity(
        num_blocks=num_blocks,
        num_tokens=num_blocks * block_size,
        kv_bytes_per_token=131072,
        weights_bytes=0,
        activation_bytes=0,
        cuda_graph_bytes=0,
        available_kv_bytes=num_blocks * block_size * 131072,
        max_concurrency=1.0,
        block_size=block_size,
        max_model_len=1024,
    )


def fake_core(num_blocks: int, config: VllmConfig | TrtllmConfig) -> EngineCore:
    """An engine core with ``num_blocks`` KV blocks and the linear cost model."""
    resolved: ResolvedConfig = resolve(config)
    block_size = (
        resolved.block_size if isinstance(config, VllmConfig) else resolved.tokens_per_block
    )
    return EngineCore(resolved, fake_capacity(num_blocks, block_size), LinearCost())  # type: ignore[arg-type]


def drive(
    core: EngineCore,
    requests: Iterable[SimRequest],
    on_step: Callable[[EngineCore, StepResult], None] | None = None,
) -> dict[str, list[float]]:
    """Step a core one step at a time (no decode runs); token times per request id."""
    pending = sorted(requests, key=lambda r: r.arrival_s)
    times: dict[str, list[float]] = {r.request_id: [] for r in pending}
    now, i = 0.0, 0
    for _ in range(1_000_000):
        while i < len(pending) and pending[i].arrival_s <= now:
            core.add_request(pending[i])
            i += 1
        if not core.has_unfinished():
            if i >= len(pending):
                return times
            now = pending[i].arrival_s
            continue
        result = core.step()
        assert result is not None, "the engine stalled with unfinished requests"
        if on_step is not None:
            on_step(core, result)
        now += result.duration_s
        for rid, n in result.tokens:
            times[rid].extend([now] * n)
    raise AssertionError("the engine did not finish within the step limit")


def check_step_invariants(core: EngineCore, result: StepResult) -> None:
    """Budget, batch size and KV block accounting after one step."""
    scheduler = core.scheduler
    bm = core.block_manager
    assert result.num_scheduled_tokens <= scheduler.token_budget
    assert len(scheduler.running) <= scheduler.max_running
    held = sum(s.num_blocks for s in scheduler.running) - bm.num_shared_holds
    assert all(not s.num_blocks for s in scheduler.waiting)
    assert held + bm.num_free_blocks == bm.num_blocks
    for s in scheduler.running:
        assert s.num_blocks * bm.block_size >= s.num_computed_tokens
