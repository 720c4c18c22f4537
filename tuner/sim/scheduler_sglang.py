"""SGLang's scheduler, one step at a time.

Each step is either a prefill batch or a decode batch, and prefill comes first: whenever a
waiting request (or the request whose prompt is being chunked) can be admitted, the step
is a prefill batch and the running requests do not decode in it. Only with
``--enable-mixed-chunk`` (and chunked prefill on) do the running requests decode one token
inside the prefill batch, their tokens taken from the prefill budgets first.

Prefill batch (SGLang's ``PrefillAdder``):

- the request being chunked goes first and takes up to ``chunked_prefill_size`` tokens;
- then waiting requests in policy order: ``fcfs`` (arrival order), ``lpm`` (longest cached
  prefix first; SGLang falls back to arrival order when more than 128 requests wait),
  ``lof`` (longest ``max_tokens`` first); ``lpm`` and ``dfs-weight`` become ``fcfs`` when
  the radix cache is off, as in SGLang;
- a request is admitted while its new prompt tokens plus its ``max_tokens`` (clipped at
  4096) fit in the free and evictable KV tokens left after the reservation: every running
  request reserves ``new_token_ratio`` times its remaining ``max_tokens``, every request
  admitted in this batch its whole prompt and ``max_tokens``;
- ``max_prefill_tokens`` bounds the new prompt tokens of a batch (its first request always
  gets in); a prompt longer than what is left of ``chunked_prefill_size`` is cut to it
  (page aligned) and becomes the one request being chunked;
- at most ``max_running_requests`` requests run.

``new_token_ratio`` starts at 0.7 x ``schedule_conservativeness`` (at most 1), falls by
``(init - init x 0.14) / 600`` every decode step down to init x 0.14, and returns to its
start at a step that finds no request running (SGLang: when its event loop idles). A larger conservativeness reserves more KV for the tokens
running requests will still produce, so fewer requests are admitted and fewer retracted.

Decode batch: every running request decodes one token. When the KV pool cannot hold the
next token of each, requests are retracted (SGLang's preemption) until it can, the one
with the fewest output tokens (then the longest prompt) first: their KV is freed (the
prompt stays in the radix tree, evictable), they wait again, and ``new_token_ratio``
becomes ``(decoded + 20 x running) / (Σ max_tokens + 1)`` (at most 1), so admission turns
cautious after a shortage.

Radix prefix reuse is the block manager's prefix caching: a cached prefix is reused in
whole KV blocks. See docs/sglang.md for where this departs from SGLang.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from slotune.tuner.sim.block_manager import BlockManager
from slotune.tuner.sim.request import RequestState, RequestStatus
from slotune.tuner.sim.scheduler import ScheduledBatch, Scheduler

CLIP_MAX_NEW_TOKENS = 4096
"""SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION: the most output tokens one request reserves."""
INIT_NEW_TOKEN_RATIO = 0.7
"""SGLANG_INIT_NEW_TOKEN_RATIO, multiplied by ``schedule_conservativeness``."""
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
"""SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR: the floor as a share of the initial ratio."""
NEW_TOKEN_RATIO_DECAY_STEPS = 600
"""SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS: decode steps from the initial ratio to its floor."""
RETRACT_DECODE_STEPS = 20
"""SGLANG_RETRACT_DECODE_STEPS: decode steps of headroom the ratio assumes after a retraction."""
LPM_MAX_QUEUE = 128
"""Above this many waiting requests SGLang skips the prefix matching of ``lpm``."""

SCHEDULE_POLICIES = ("lpm", "random", "fcfs", "dfs-weight", "lof")
"""The ``--schedule-policy`` values the simulator schedules (``dfs-weight`` as ``lpm``)."""


@dataclass(frozen=True, slots=True)
class SglangSchedule:
    """The scheduling arguments of ``python -m sglang.launch_server``, resolved.

    Attributes:
        max_running_requests: most requests running at once.
        chunked_prefill_size: most prompt tokens of one chunk; None: chunked prefill off.
        max_prefill_tokens: most new prompt tokens of one prefill batch.
        schedule_policy: one of :data:`SCHEDULE_POLICIES`.
        schedule_conservativeness: scales the initial ``new_token_ratio``.
        page_size: SGLang's KV page (chunks and prompt budgets are page aligned).
        enable_mixed_chunk: running requests decode inside prefill batches.
        radix_cache: prefix reuse on (``--disable-radix-cache`` not given).
        seed: seeds the ``random`` policy.
    """

    max_running_requests: int
    chunked_prefill_size: int | None
    max_prefill_tokens: int
    schedule_policy: str = "fcfs"
    schedule_conservativeness: float = 1.0
    page_size: int = 1
    enable_mixed_chunk: bool = False
    radix_cache: bool = True
    seed: int = 0

    @property
    def init_new_token_ratio(self) -> float:
        return min(INIT_NEW_TOKEN_RATIO * self.schedule_conservativeness, 1.0)

    @property
    def min_new_token_ratio(self) -> float:
        return min(self.init_new_token_ratio * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)


class SglangScheduler(Scheduler):
    """Iteration-level scheduler with SGLang's rules (see the module docstring)."""

    def __init__(self, schedule: SglangSchedule, block_manager: BlockManager) -> None:
        # SGLang has no per-step token budget for decode; prefill has its own budgets.
        super().__init__(
            block_manager,
            max_running=schedule.max_running_requests,
            token_budget=1 << 62,
        )
        self.schedule_args = schedule
        policy = schedule.schedule_policy
        if policy in ("lpm", "dfs-weight"):
            policy = "lpm" if schedule.radix_cache else "fcfs"
        self.policy = policy
        self.is_mixed = schedule.enable_mixed_chunk and schedule.chunked_prefill_size is not None
        self.new_token_ratio = schedule.init_new_token_ratio
        self._ratio_decay = (
            schedule.init_new_token_ratio - schedule.min_new_token_ratio
        ) / NEW_TOKEN_RATIO_DECAY_STEPS
        self._rng = random.Random(schedule.seed)

    def _requeue(self, state: RequestState) -> None:
        # SGLang appends retracted requests to the waiting queue.
        self.waiting.append(state)

    # one step
    def schedule(self) -> ScheduledBatch:
        """A prefill batch when anything can be admitted, else a decode batch."""
        batch = ScheduledBatch()
        if not self.running:
            # An idle engine starts over from the initial ratio.
            self.new_token_ratio = self.schedule_args.init_new_token_ratio
        self._schedule_waiting(batch, 0)
        if not batch.scheduled:
            self._schedule_running(batch, 0)
        return batch

    # prefill
    def _schedule_waiting(self, batch: ScheduledBatch, budget: int) -> None:
        args = self.schedule_args
        bm = self.block_manager
        chunked = self._chunked_request()
        if chunked is None and (not self.waiting or len(self.running) >= self.max_running):
            return
        decoding = [s for s in self.running if s is not chunked] if self.is_mixed else []
        mixed = len(decoding)
        rem_total = self._free_tokens() - self._running_reservation(chunked) - mixed
        rem_input = args.max_prefill_tokens - mixed
        rem_chunk = None if args.chunked_prefill_size is None else args.chunked_prefill_size - mixed
        if chunked is not None:
            left = chunked.num_tokens - chunked.num_computed_tokens
            n = left if rem_chunk is None else min(left, self._page_floor(rem_chunk))
            if n <= 0 or not bm.allocate(chunked, n):
                return
            batch.add(chunked, n)
            finishing = n == left
            rem_total -= n + (self._reserve_of(chunked) if finishing else 0)
            rem_input -= n
            if rem_chunk is not None:
                rem_chunk -= n
            if not finishing:
                # The chunk took the whole chunk budget: nothing else is admitted.
                self._mix_decodes(batch, decoding)
                return
        for state in self._ordered_waiting():
            if len(self.running) >= self.max_running:
                break
            if rem_total <= 0 or rem_input <= 0 or (rem_chunk is not None and rem_chunk <= 0):
                break
            cached = bm.cached_prefix(state) if state.num_computed_tokens == 0 else []
            extend = state.num_tokens - state.num_computed_tokens - len(cached) * bm.block_size
            reserve = self._reserve_of(state)
            # Taking a cached prefix locks it: those tokens are no longer evictable.
            locked = bm.num_free_among(cached) * bm.block_size
            if extend + reserve >= rem_total - locked:
                break
            input_tokens = self._page_ceil(extend)
            if input_tokens >= rem_input and batch.scheduled:
                break
            n = extend
            if rem_chunk is not None and input_tokens > rem_chunk:
                n = self._page_floor(rem_chunk)
                if n <= 0:
                    break
            is_fresh = state.num_computed_tokens == 0
            if not bm.allocate(state, n, cached):
                break
            if is_fresh:
                bm.record_lookup(state)
            self.waiting.remove(state)
            state.status = RequestStatus.RUNNING
            self.running.append(state)
            batch.add(state, n)
            rem_total -= n + locked + (reserve if n == extend else 0)
            rem_input -= n
            if rem_chunk is not None:
                rem_chunk -= n
            if n < extend:
                break  # it is now the request being chunked
        if batch.scheduled:
            self._mix_decodes(batch, decoding)

    def _mix_decodes(self, batch: ScheduledBatch, decoding: list[RequestState]) -> None:
        bm = self.block_manager
        for state in decoding:
            if bm.allocate(state, 1):
                batch.add(state, 1)

    def _chunked_request(self) -> RequestState | None:
        for state in self.running:
            if state.is_prefilling:
                return state
        return None

    def _ordered_waiting(self) -> Iterator[RequestState]:
        """Waiting requests in policy order; arrival order is read off the live queue.

        A caller stops at the first request it does not admit and admitting one removes it
        from the queue, so the arrival-order case needs no copy of a long queue.
        """
        waiting = self.waiting
        if self.policy == "lpm" and len(waiting) <= LPM_MAX_QUEUE:
            bm = self.block_manager
            yield from sorted(
                waiting,
                key=lambda s: -len(bm.cached_prefix(s)) if s.num_computed_tokens == 0 else 0,
            )
        elif self.policy == "lof":
            yield from sorted(waiting, key=lambda s: -s.request.max_tokens)
        elif self.policy == "random":
            shuffled = list(waiting)
            self._rng.shuffle(shuffled)
            yield from shuffled
        else:
            while waiting:
                yield waiting[0]

    # decode
    def _schedule_running(self, batch: ScheduledBatch, budget: int) -> int:
        bm = self.block_manager
        decoding = [s for s in self.running if not s.is_prefilling]
        if not decoding:
            return budget
        if self._decode_fits(decoding):
            self.new_token_ratio = max(
                self.new_token_ratio - self._ratio_decay, self.schedule_args.min_new_token_ratio
            )
        else:
            self._retract(decoding, batch)
        for state in decoding:
            if bm.allocate(state, 1):
                batch.add(state, 1)
        return budget

    def _decode_fits(self, decoding: list[RequestState]) -> bool:
        bm = self.block_manager
        need = sum(1 for s in decoding if bm.blocks_for(s.num_computed_tokens + 1) > s.num_blocks)
        return need <= bm.num_free_blocks

    def _retract(self, decoding: list[RequestState], batch: ScheduledBatch) -> None:
        # SGLang sorts by (output tokens, -prompt tokens) descending and pops from the end.
        decoding.sort(key=lambda s: (s.num_output_tokens, -s.request.prompt_tokens), reverse=True)
        first = True
        while len(decoding) > 1 and (first or not self._decode_fits(decoding)):
            first = False
            victim = decoding.pop()
            self.running.remove(victim)
            self._preempt(victim)
            batch.preempted.append(victim)
        decoded = sum(s.num_output_tokens for s in decoding)
        max_new = sum(s.request.max_tokens for s in decoding)
        self.new_token_ratio = min(
            1.0, (decoded + RETRACT_DECODE_STEPS * len(decoding)) / (max_new + 1)
        )

    # budgets
    def _free_tokens(self) -> int:
        """Free plus evictable KV tokens (a cached free block is evictable)."""
        return self.block_manager.num_free_blocks * self.block_manager.block_size

    def _reserve_of(self, state: RequestState) -> int:
        left = state.request.max_tokens - state.num_output_tokens
        return min(max(left, 0), CLIP_MAX_NEW_TOKENS)

    def _running_reservation(self, chunked: RequestState | None) -> float:
        ratio = self.new_token_ratio
        return sum(self._reserve_of(s) * ratio for s in self.running if s is not chunked)

    def _page_ceil(self, num_tokens: int) -> int:
        page = self.schedule_args.page_size
        return -(-num_tokens // page) * page

    def _page_floor(self, num_tokens: int) -> int:
        page = self.schedule_args.page_size
        return num_tokens // page * page

    # decode runs
    def _admission_blocked(self) -> bool:
        if self._chunked_request() is not None:
            return False
        if not self.waiting or len(self.running) >= self.max_running:
            return True
        if self.policy == "random":
            return False
        # Over a decode run the ratio only falls, the reservations shrink by at most one
        # token per request and step, and the free tokens shrink by at least that less one
        # block per request: the room a waiting request could find is bounded by the free
        # tokens, plus a block per request, less the smallest reservation now.
        head = next(self._ordered_waiting())
        bm = self.block_manager
        cached = bm.cached_prefix(head) if head.num_computed_tokens == 0 else []
        extend = head.num_tokens - head.num_computed_tokens - len(cached) * bm.block_size
        floor_ratio = self.schedule_args.min_new_token_ratio
        room = (
            self._free_tokens()
            + len(self.running) * bm.block_size
            - sum(self._reserve_of(s) * floor_ratio for s in self.running)
        )
        return extend + self._reserve_of(head) >= room

    def advance_decode(self, num_steps: int) -> list[RequestState]:
        floor = self.schedule_args.min_new_token_ratio
        self.new_token_ratio = max(self.new_token_ratio - num_steps * self._ratio_decay, floor)
        return super().advance_decode(num_steps)
