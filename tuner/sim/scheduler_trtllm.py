"""TensorRT-LLM's in-flight batching scheduler, one step at a time.

Two stages, as in TensorRT-LLM's batch manager:

- capacity scheduler (``capacity_scheduler_policy``): ``GUARANTEED_NO_EVICT`` admits a
  request only when the KV blocks of its whole prompt and all ``max_tokens`` can be
  reserved next to what the running requests will still need, so nothing is ever evicted;
  ``MAX_UTILIZATION`` admits as long as the next step fits and, when blocks run out,
  pauses the most recently started request (its KV is freed and recomputed later).
- micro-batch scheduler: at most ``max_batch_size`` requests and ``max_num_tokens`` tokens
  per step; generation requests first, then context requests. Without
  ``enable_chunked_prefill`` a prompt runs whole in one step; with it, context chunks are
  multiples of ``tokens_per_block`` except the last.

``enable_block_reuse`` reuses KV blocks of identical prefixes (the block manager's caching).
"""

from __future__ import annotations

from slotune.tuner.sim.block_manager import BlockManager
from slotune.tuner.sim.request import RequestState, RequestStatus
from slotune.tuner.sim.scheduler import ScheduledBatch, Scheduler
from slotune.tuner.sim.view import SimView


class TrtllmScheduler(Scheduler):
    """Iteration-level scheduler with TensorRT-LLM's rules (see the module docstring)."""

    def __init__(
        self, view: SimView, capacity_scheduler_policy: str, block_manager: BlockManager
    ) -> None:
        super().__init__(
            block_manager, max_running=view.max_running, token_budget=view.token_budget
        )
        self.chunked = view.chunked_prefill
        self.is_guaranteed = capacity_scheduler_policy == "GUARANTEED_NO_EVICT"

    # generation first, then contexts already under way
    def _schedule_running(self, batch: ScheduledBatch, budget: int) -> int:
        decoding = [s for s in self.running if not s.is_prefilling]
        contexts = [s for s in self.running if s.is_prefilling]
        for state in decoding + contexts:
            if budget <= 0:
                break
            if state.status is not RequestStatus.RUNNING:
                continue
            n = self._chunk(state.num_tokens - state.num_computed_tokens, budget)
            if n <= 0:
                continue
            while not self.block_manager.allocate(state, n):
                victim = self.running[-1]
                budget += batch.remove(victim)
                self.running.remove(victim)
                self._preempt(victim)
                batch.preempted.append(victim)
                if victim is state:
                    break
            else:
                batch.add(state, n)
                budget -= n
        return budget

    # capacity scheduling of new requests
    def _schedule_waiting(self, batch: ScheduledBatch, budget: int) -> None:
        bm = self.block_manager
        outstanding = self._outstanding_reservation() if self.is_guaranteed else 0
        while self.waiting and budget > 0 and len(self.running) < self.max_running:
            state = self.waiting[0]
            cached = bm.cached_prefix(state) if state.num_computed_tokens == 0 else []
            remaining = state.num_tokens - state.num_computed_tokens - len(cached) * bm.block_size
            n = self._chunk(remaining, budget)
            if n <= 0:
                break
            if self.is_guaranteed and not self._fits_reservation(state, cached, outstanding):
                break
            is_fresh = state.num_computed_tokens == 0
            if not bm.allocate(state, n, cached):
                break
            if is_fresh:
                bm.record_lookup(state)
            if self.is_guaranteed:
                outstanding += self._full_blocks(state) - state.num_blocks
            self.waiting.popleft()
            state.status = RequestStatus.RUNNING
            self.running.append(state)
            batch.add(state, n)
            budget -= n

    def _chunk(self, remaining: int, budget: int) -> int:
        if remaining <= budget:
            return remaining
        if not self.chunked:
            return 0
        per_block = self.block_manager.block_size
        return budget // per_block * per_block

    def _full_blocks(self, state: RequestState) -> int:
        request = state.request
        return self.block_manager.blocks_for(request.prompt_tokens + request.max_tokens)

    def _outstanding_reservation(self) -> int:
        return sum(self._full_blocks(s) - s.num_blocks for s in self.running)

    def _fits_reservation(self, state: RequestState, cached: list[int], outstanding: int) -> bool:
        bm = self.block_manager
        need = self._full_blocks(state) - len(cached)
        available = bm.num_free_blocks - outstanding - bm.num_free_among(cached)
        return need <= available

    def _admission_blocked(self) -> bool:
        if not self.waiting or len(self.running) >= self.max_running:
            return True
        bm = self.block_manager
        head = self.waiting[0]
        budget = self.token_budget - len(self.running)
        cached = bm.cached_prefix(head) if head.num_computed_tokens == 0 else []
        remaining = head.num_tokens - head.num_computed_tokens - len(cached) * bm.block_size
        n = self._chunk(remaining, budget)
        if budget <= 0 or n <= 0:
            return True
        if self.is_guaranteed:
            return not self._fits_reservation(head, cached, self._outstanding_reservation())
        return not bm.can_allocate(head, n, cached)

    def _steps_covered_by_free_blocks(self) -> int:
        if self.is_guaranteed:
            # Every running request's blocks up to max_tokens are reserved.
            return 1 << 62
        return super()._steps_covered_by_free_blocks()
