"""A request as the simulated engine sees it, and its mutable state inside the scheduler.

There is no model to emit an EOS token, so the output length is part of the request: a
request generates ``max_tokens`` tokens (as a real engine does with ``ignore_eos``), or,
when ``eos_after_tokens`` is set, stops after that many like a model that emits EOS there
(vLLM's ``finish_reason`` "stop"; "length" when ``max_tokens`` comes first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from slotune.collector.errors import SlotuneError


class RequestRejected(SlotuneError):
    """The engine refuses one request (too long for ``max_model_len`` / ``max_num_tokens``).

    A real server answers such a request with HTTP 400 and keeps serving the others.
    """


@dataclass(frozen=True, slots=True)
class SimRequest:
    """One request handed to the simulated engine.

    Prefix identity comes from ``prompt_token_ids`` (the emulated engine derives them from
    the prompt text) or from ``hash_ids`` (trace prefix-block ids, ``hash_block_size``
    tokens each; equal ids mean equal text). Without either, the prompt shares nothing
    with any other request.

    Attributes:
        request_id: unique id within one engine.
        arrival_s: arrival time on the caller's clock.
        prompt_tokens: prompt length in tokens.
        max_tokens: most output tokens (the request's ``max_tokens``).
        prompt_token_ids: the prompt's token ids, when known.
        hash_ids: trace prefix-block ids.
        hash_block_size: tokens per ``hash_ids`` block (Mooncake: 512).
        priority: lower values are served first under ``scheduling_policy=priority``.
        eos_after_tokens: the model emits EOS after this many output tokens; None: it
            never does (the request runs to ``max_tokens``).
    """

    request_id: str
    arrival_s: float
    prompt_tokens: int
    max_tokens: int
    prompt_token_ids: tuple[int, ...] | None = None
    hash_ids: tuple[int, ...] = ()
    hash_block_size: int | None = None
    priority: int = 0
    eos_after_tokens: int | None = None

    @property
    def num_output_tokens(self) -> int:
        """Tokens the request generates: up to EOS or ``max_tokens``, whichever is first."""
        eos = self.eos_after_tokens
        return self.max_tokens if eos is None or eos > self.max_tokens else eos

    @property
    def finish_reason(self) -> str:
        """vLLM's ``finish_reason``: "stop" at EOS (checked first), else "length"."""
        eos = self.eos_after_tokens
        return "stop" if eos is not None and eos <= self.max_tokens else "length"

    def __post_init__(self) -> None:
        if self.prompt_tokens < 1:
            raise RequestRejected(
                f"request {self.request_id}: the prompt must have at least one token"
            )
        if self.max_tokens < 1:
            raise RequestRejected(
                f"request {self.request_id}: max_tokens must be at least 1, got {self.max_tokens}"
            )
        if self.eos_after_tokens is not None and self.eos_after_tokens < 1:
            raise RequestRejected(
                f"request {self.request_id}: eos_after_tokens must be at least 1, "
                f"got {self.eos_after_tokens}"
            )
        if self.prompt_token_ids is not None and len(self.prompt_token_ids) != self.prompt_tokens:
            raise RequestRejected(
                f"request {self.request_id}: prompt_token_ids has {len(self.prompt_token_ids)} "
                f"ids but prompt_tokens is {self.prompt_tokens}; pass matching values"
            )
        if self.hash_ids and not self.hash_block_size:
            raise RequestRejected(
                f"request {self.request_id}: hash_ids need hash_block_size "
                "(tokens per hash block, 512 for Mooncake traces)"
            )


class RequestStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"
    ABORTED = "aborted"


@dataclass(slots=True, eq=False)
class RequestState:
    """A request's progress inside the engine (mutable; owned by the scheduler).

    ``num_tokens`` is prompt + generated tokens; ``num_computed_tokens`` of them have KV
    in the cache. A step that brings ``num_computed_tokens`` up to ``num_tokens`` samples
    one new token, so a finished prefill emits the first token.
    """

    request: SimRequest
    block_hashes: list[int]
    status: RequestStatus = RequestStatus.WAITING
    num_computed_tokens: int = 0
    num_output_tokens: int = 0
    num_cached_tokens: int = 0
    num_hashed_blocks: int = 0
    # KV blocks held; of them the first num_hashed_blocks carry block_hashes, except
    # these (index -> key) whose hash another block carried first
    num_blocks: int = 0
    unshared_blocks: dict[int, object] | None = None
    was_scheduled: bool = False
    # Order the engine received it in: breaks ties of equal priority and arrival time.
    arrival_order: int = 0
    # prompt + generated tokens, kept by the scheduler as tokens are sampled (read for
    # every running request every step)
    num_tokens: int = field(init=False)

    def __post_init__(self) -> None:
        self.num_tokens = self.request.prompt_tokens + self.num_output_tokens

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def is_prefilling(self) -> bool:
        return self.num_computed_tokens < self.num_tokens - 1


def prefix_block_hashes(request: SimRequest, block_size: int) -> list[int]:
    """Prefix-chained hashes of the prompt's full blocks of ``block_size`` tokens.

    Equal hashes mean equal prefixes. From token ids, block ``j`` hashes its parent's hash
    with its own tokens. From trace ``hash_ids`` (equal ids = equal text, any block size),
    the trace blocks are chained first, and engine block ``j`` is identified by the chain
    through the trace block holding its last token plus that token's position, so equal
    trace ids give equal engine hashes whatever the two block sizes. Empty when the prompt
    has no identity.
    """
    num_full = request.prompt_tokens // block_size
    if request.prompt_token_ids is not None:
        ids = request.prompt_token_ids
        hashes: list[int] = []
        parent = 0
        for j in range(num_full):
            parent = hash((parent, ids[j * block_size : (j + 1) * block_size]))
            hashes.append(parent)
        return hashes
    if request.hash_ids and request.hash_block_size:
        return _trace_block_hashes(request.hash_ids, request.hash_block_size, block_size, num_full)
    return []


def _trace_block_hashes(
    hash_ids: tuple[int, ...], trace_block: int, block_size: int, num_full: int
) -> list[int]:
    chained: list[int] = []
    parent = 0
    for h in hash_ids:
        parent = hash((parent, h))
        chained.append(parent)
    n = min(num_full, len(hash_ids) * trace_block // block_size)
    # Engine block j ends at token (j + 1) * block_size: mix that position into the chain
    # of the trace block holding its last token, for all blocks at once (a long prompt
    # has hundreds; 64-bit mixing keeps collisions out of reach).
    ends = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(block_size)
    chains = np.array(chained, dtype=np.int64).view(np.uint64)
    owner = ((ends - np.uint64(1)) // np.uint64(trace_block)).astype(np.intp)
    mixed = chains[owner] ^ (ends * _POSITION_MIX)
    out: list[int] = mixed.view(np.int64).tolist()
    return out


_POSITION_MIX = np.uint64(0x9E3779B97F4A7C15)
