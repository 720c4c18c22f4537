"""vLLM V1's scheduler, one step at a time.

Each step has a token budget (``max_num_batched_tokens``). Running requests go first, in
order: a decoding request takes one token, a request still prefilling takes what is left
of its prompt (capped by ``long_prefill_token_threshold`` and the budget). When KV blocks
run out, the newest running request (``fcfs``) or the least important one (``priority``)
is preempted: its blocks are freed and it waits to be recomputed. Only in a step without
preemptions are waiting requests admitted, in queue order, while the budget, the
``max_num_seqs`` limit and the free blocks allow; prefix-cache hits skip their tokens.
With chunked prefill off a prompt is scheduled whole or not at all.

``max_num_partial_prefills`` > 1 (vLLM's concurrent partial prefills): at most that many
requests prefill at once, each getting an equal share of the budget, and at most
``max_long_partial_prefills`` of them may be long (more than
``long_prefill_token_threshold`` tokens left); shorter prompts may pass long ones.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from slotune.tuner.sim.block_manager import BlockManager
from slotune.tuner.sim.request import RequestState, RequestStatus
from slotune.tuner.sim.scheduler import ScheduledBatch, Scheduler
from slotune.tuner.sim.view import SimView


@dataclass(frozen=True, slots=True)
class VllmSchedule:
    """vLLM's scheduling settings beyond the :class:`SimView`, by vLLM's own names.

    Attributes:
        long_prefill_token_threshold: most prompt tokens one request prefills per step
            (0: no cap).
        max_num_partial_prefills: requests that may prefill at once.
        max_long_partial_prefills: of those, how many may be long.
        scheduling_policy: ``fcfs`` or ``priority``.
    """

    long_prefill_token_threshold: int
    max_num_partial_prefills: int
    max_long_partial_prefills: int
    scheduling_policy: str


def _priority_key(state: RequestState) -> tuple[int, float, int]:
    # Equal priority and arrival: the later-received request yields (without it two such
    # requests that cannot fit together would preempt each other forever).
    return (state.request.priority, state.request.arrival_s, state.arrival_order)


class VllmScheduler(Scheduler):
    """Iteration-level scheduler with vLLM V1's rules (see the module docstring)."""

    def __init__(self, view: SimView, schedule: VllmSchedule, block_manager: BlockManager) -> None:
        super().__init__(
            block_manager, max_running=view.max_running, token_budget=view.token_budget
        )
        self.chunked = view.chunked_prefill
        self.threshold = schedule.long_prefill_token_threshold
        self.max_partial = schedule.max_num_partial_prefills
        self.max_long_partial = schedule.max_long_partial_prefills
        self.is_priority = schedule.scheduling_policy == "priority"
        self._num_received = 0

    def add(self, state: RequestState) -> None:
        self._num_received += 1
        state.arrival_order = self._num_received
        if self.is_priority:
            bisect.insort(self.waiting, state, key=_priority_key)
        else:
            self.waiting.append(state)

    def _requeue(self, state: RequestState) -> None:
        if self.is_priority:
            bisect.insort(self.waiting, state, key=_priority_key)
        else:
            self.waiting.appendleft(state)

    # running requests
    def _schedule_running(self, batch: ScheduledBatch, budget: int) -> int:
        bm = self.block_manager
        block_size = bm.block_size
        running = self.running
        slot = self._prefill_slot_budget()
        i = 0
        while i < len(running) and budget > 0:
            state = running[i]
            computed = state.num_computed_tokens
            if computed == state.num_tokens - 1 and computed < state.num_blocks * block_size:
                # Decoding within its last block (most requests, most steps): nothing to
                # allocate, nothing to register.
                batch.add_decode(state)
                budget -= 1
                i += 1
                continue
            n = self._cap(state.num_tokens - computed, budget, slot)
            if n <= 0:
                i += 1
                continue
            while not bm.allocate(state, n):
                victim = self._pick_victim()
                if victim is not state and self.is_priority:
                    victim_index = running.index(victim)
                    budget += batch.remove(victim)
                    if victim_index < i:
                        i -= 1
                running.remove(victim)
                self._preempt(victim)
                batch.preempted.append(victim)
                if victim is state:
                    break
            else:
                batch.add(state, n)
                budget -= n
                i += 1
                continue
            # The request preempted itself: nothing after it can be scheduled either.
            break
        return budget

    def _pick_victim(self) -> RequestState:
        if self.is_priority:
            return max(self.running, key=_priority_key)
        return self.running[-1]

    # waiting requests
    def _schedule_waiting(self, batch: ScheduledBatch, budget: int) -> None:
        bm = self.block_manager
        waiting = self.waiting
        partial = self.max_partial > 1
        num_prefilling, num_long = self._prefill_counts() if partial else (0, 0)
        slot = self._prefill_slot_budget()
        idx = 0
        while idx < len(waiting) and budget > 0 and len(self.running) < self.max_running:
            state = waiting[idx]
            cached = bm.cached_prefix(state) if state.num_computed_tokens == 0 else []
            remaining = state.num_tokens - state.num_computed_tokens - len(cached) * bm.block_size
            if partial:
                if num_prefilling >= self.max_partial:
                    break
                if remaining > self.threshold and num_long >= self.max_long_partial:
                    idx += 1
                    continue
            # long_prefill_token_threshold applies before the no-chunking check, as in vLLM.
            this_step = min(remaining, self.threshold) if self.threshold else remaining
            if not self.chunked and this_step > budget:
                break
            n = self._cap(this_step, budget, slot)
            is_fresh = state.num_computed_tokens == 0
            if not bm.allocate(state, n, cached):
                break
            if is_fresh:
                bm.record_lookup(state)
            del waiting[idx]
            state.status = RequestStatus.RUNNING
            self.running.append(state)
            batch.add(state, n)
            budget -= n
            if partial:
                num_prefilling += 1
                num_long += remaining > self.threshold

    def _cap(self, num_new: int, budget: int, slot: int) -> int:
        if num_new > 1:
            if self.threshold and num_new > self.threshold:
                num_new = self.threshold
            if num_new > slot:
                num_new = slot
        return min(num_new, budget)

    def _prefill_counts(self) -> tuple[int, int]:
        prefilling = [s for s in self.running if s.is_prefilling]
        num_long = sum(
            1 for s in prefilling if s.num_tokens - s.num_computed_tokens > self.threshold
        )
        return len(prefilling), num_long

    def _prefill_slot_budget(self) -> int:
        if self.max_partial <= 1:
            return self.token_budget
        num_prefilling, _ = self._prefill_counts()
        schedulable = min(self.max_partial, num_prefilling + len(self.waiting))
        return max(1, self.token_budget // max(1, schedulable))

    def _admission_blocked(self) -> bool:
        if not self.waiting or len(self.running) >= self.max_running:
            return True
        if self.max_partial > 1 or self.is_priority:
            return False
        budget = self.token_budget - len(self.running)
        head = self.waiting[0]
        bm = self.block_manager
        cached = bm.cached_prefix(head) if head.num_computed_tokens == 0 else []
        remaining = head.num_tokens - head.num_computed_tokens - len(cached) * bm.block_size
        if self.threshold:
            remaining = min(remaining, self.threshold)
        if budget <= 0 or (not self.chunked and remaining > budget):
            return True
        return not bm.can_allocate(head, min(remaining, budget), cached)
