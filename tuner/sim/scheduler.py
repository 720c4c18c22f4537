"""What every iteration-level scheduler shares: queues, step bookkeeping, decode runs.

A scheduler decides, once per engine step, which requests run and how many tokens each
computes (:meth:`Scheduler.schedule`), then applies the step's outcome
(:meth:`Scheduler.update`): tokens sampled, requests finished, blocks freed. The engine
prices the step with the cost model in between.

Fast-forward: when every running request is decoding and nothing else can change for a
while (no admission possible, no block shortage, nobody finishing), the next steps are
identical up to growing context; :meth:`Scheduler.decode_run_length` says how many, and
:meth:`Scheduler.advance_decode` applies them at once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, field

from slotune.tuner.sim.block_manager import BlockManager
from slotune.tuner.sim.request import RequestState, RequestStatus


@dataclass(slots=True)
class ScheduledBatch:
    """One step's schedule and its shape for the cost model.

    Attributes:
        scheduled: (request, tokens to compute) for every request in the step.
        preempted: requests preempted (KV freed, to be recomputed) while scheduling.
        started: requests scheduled for the first time.
        num_prefill_tokens: tokens of prefill chunks.
        prefill_attention_work: Σ n_new × (n_ctx_before + n_new / 2) over prefill chunks.
        num_prefill_seqs: requests with a prefill chunk.
        num_decode_seqs: requests decoding one token.
        decode_context_tokens: KV tokens the decoding requests read.
    """

    scheduled: list[tuple[RequestState, int]] = field(default_factory=list)
    preempted: list[RequestState] = field(default_factory=list)
    started: list[RequestState] = field(default_factory=list)
    num_prefill_tokens: int = 0
    prefill_attention_work: float = 0.0
    num_prefill_seqs: int = 0
    num_decode_seqs: int = 0
    decode_context_tokens: int = 0

    @property
    def num_scheduled_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decode_seqs

    def add(self, state: RequestState, num_new_tokens: int) -> None:
        self.scheduled.append((state, num_new_tokens))
        if not state.was_scheduled:
            state.was_scheduled = True
            self.started.append(state)
        computed = state.num_computed_tokens
        if num_new_tokens == 1 and computed == state.num_tokens - 1:
            self.num_decode_seqs += 1
            self.decode_context_tokens += computed + 1
        else:
            self.num_prefill_seqs += 1
            self.num_prefill_tokens += num_new_tokens
            self.prefill_attention_work += num_new_tokens * (computed + num_new_tokens / 2)

    def add_decode(self, state: RequestState) -> None:
        """``add(state, 1)`` for a running request that decodes (it was scheduled before)."""
        self.scheduled.append((state, 1))
        self.num_decode_seqs += 1
        self.decode_context_tokens += state.num_tokens

    def remove(self, state: RequestState) -> int:
        """Take a request back out of the schedule (it was preempted); returns its tokens."""
        for i, (s, n) in enumerate(self.scheduled):
            if s is state:
                del self.scheduled[i]
                computed = state.num_computed_tokens
                if n == 1 and computed == state.num_tokens - 1:
                    self.num_decode_seqs -= 1
                    self.decode_context_tokens -= computed + 1
                else:
                    self.num_prefill_seqs -= 1
                    self.num_prefill_tokens -= n
                    self.prefill_attention_work -= n * (computed + n / 2)
                return n
        return 0


@dataclass(slots=True)
class StepOutcome:
    """What one step produced: (request id, tokens) sampled, and finished requests."""

    tokens: list[tuple[str, int]]
    finished: list[RequestState]


class Scheduler(ABC):
    """Base of the vLLM and TensorRT-LLM schedulers.

    Args:
        block_manager: the engine's KV blocks.
        max_running: most requests running at once (``max_num_seqs`` / ``max_batch_size``).
        token_budget: most tokens per step (``max_num_batched_tokens`` / ``max_num_tokens``).
    """

    def __init__(self, block_manager: BlockManager, *, max_running: int, token_budget: int) -> None:
        self.block_manager = block_manager
        self.max_running = max_running
        self.token_budget = token_budget
        self.waiting: deque[RequestState] = deque()
        self.running: list[RequestState] = []
        self.num_preemptions = 0

    # queues
    def add(self, state: RequestState) -> None:
        self.waiting.append(state)

    def abort(self, request_id: str) -> RequestState | None:
        """Drop a request wherever it is, freeing its blocks."""
        for queue in (self.running, self.waiting):
            for state in queue:
                if state.request_id == request_id:
                    queue.remove(state)
                    self.block_manager.free(state)
                    state.status = RequestStatus.ABORTED
                    return state
        return None

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # one step
    def schedule(self) -> ScheduledBatch:
        """Choose this step's requests and token counts, allocating their KV blocks.

        Running requests come first; waiting ones are admitted only in a step that preempted
        nobody, with the token budget the running ones left.
        """
        batch = ScheduledBatch()
        budget = self._schedule_running(batch, self.token_budget)
        if not batch.preempted:
            self._schedule_waiting(batch, budget)
        return batch

    @abstractmethod
    def _schedule_running(self, batch: ScheduledBatch, budget: int) -> int:
        """Schedule running requests into ``batch``; return the token budget left."""

    @abstractmethod
    def _schedule_waiting(self, batch: ScheduledBatch, budget: int) -> None:
        """Admit waiting requests into ``batch`` within ``budget`` tokens."""

    def update(self, batch: ScheduledBatch) -> StepOutcome:
        """Apply a computed step: sample a token where a request caught up, retire finished."""
        tokens: list[tuple[str, int]] = []
        finished: list[RequestState] = []
        for state, n in batch.scheduled:
            state.num_computed_tokens += n
            if state.num_computed_tokens >= state.num_tokens:
                state.num_output_tokens += 1
                state.num_tokens += 1
                tokens.append((state.request.request_id, 1))
                if state.num_output_tokens >= state.request.num_output_tokens:
                    finished.append(state)
        if finished:
            self._retire(finished)
        return StepOutcome(tokens, finished)

    def _retire(self, finished: list[RequestState]) -> None:
        for state in finished:
            state.status = RequestStatus.FINISHED
            self.block_manager.free(state)
        self.running = [s for s in self.running if s.status is RequestStatus.RUNNING]

    def _preempt(self, state: RequestState) -> None:
        """Free a request's KV and send it back to wait for recomputation."""
        self.block_manager.free(state)
        state.status = RequestStatus.PREEMPTED
        state.num_computed_tokens = 0
        state.num_cached_tokens = 0
        self.num_preemptions += 1
        self._requeue(state)

    def _requeue(self, state: RequestState) -> None:
        self.waiting.appendleft(state)

    # decode runs
    def decode_run_length(self, max_steps: int) -> int:
        """How many next steps are certainly identical pure-decode steps (0 if not).

        Holds while every running request decodes, all fit in one step, no waiting request
        can be admitted, and the free blocks cover every block the run will need (so no
        preemption). The run ends with the first step in which a request finishes.
        """
        running = self.running
        n = len(running)
        if n == 0 or n > self.token_budget or n > self.max_running:
            return 0
        steps = max_steps
        for s in running:
            if s.num_computed_tokens != s.num_tokens - 1:
                return 0
            left = s.request.num_output_tokens - s.num_output_tokens
            if left < steps:
                steps = left
        # Asked after the cheap test above: it looks up the queue head's cached prefix.
        if steps < 2 or not self._admission_blocked():
            return 0
        return min(steps, self._steps_covered_by_free_blocks())

    def _steps_covered_by_free_blocks(self) -> int:
        bm = self.block_manager
        per_request = bm.num_free_blocks // len(self.running)
        return max(0, (per_request - 1) * bm.block_size)

    @abstractmethod
    def _admission_blocked(self) -> bool:
        """Whether no waiting request can start now nor during a decode run."""

    def advance_decode(self, num_steps: int) -> list[RequestState]:
        """Apply ``num_steps`` pure-decode steps to every running request at once.

        Returns:
            The requests that produced their last token in the run's last step.
        """
        self.block_manager.extend_decoding(self.running, num_steps)
        finished: list[RequestState] = []
        for s in self.running:
            s.num_computed_tokens += num_steps
            s.num_output_tokens += num_steps
            s.num_tokens += num_steps
            if s.num_output_tokens >= s.request.num_output_tokens:
                finished.append(s)
        if finished:
            self._retire(finished)
        return finished
