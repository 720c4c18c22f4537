"""What the simulator needs of an engine's configuration, in no engine's names.

Each engine adapter (``tuner.engines``) translates its resolved configuration into a
:class:`SimView`; the scheduler, KV blocks and cost model read only this, plus a scheduler's
own small settings record where an engine has rules no other engine shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PrefixCache(StrEnum):
    """How the engine reuses the KV cache of a prompt prefix it has seen."""

    NONE = "none"
    BLOCK_REUSE = "block_reuse"  # hashed whole blocks (vLLM prefix caching, TRT-LLM reuse)
    RADIX = "radix"  # a radix tree over tokens (SGLang's RadixAttention)


@dataclass(frozen=True, slots=True)
class SimView:
    """What the simulator needs of a resolved configuration, in no engine's names.

    Attributes:
        max_running: most requests running at once.
        token_budget: most tokens one step schedules (the prefill budget where decode has
            none).
        block_size: tokens per simulated KV block (page).
        chunked_prefill: a prompt may be computed over several steps.
        prefix_cache: how prompt prefixes are reused.
        max_len: longest request (prompt + output) the engine accepts.
        tensor_parallel_size: GPUs one replica is sharded over.
        kv_cache_dtype: ``auto`` or an fp8 spelling the cost model knows.
        memory_fraction: the engine's memory-fraction setting, as the engine means it.
        enforce_eager: no CUDA graphs.
        quantization: the weights' quantization (``fp8``); None: the model's dtype.
        overlaps_host: the engine prepares the next step on the CPU while the GPU runs this
            one (vLLM's async scheduling, SGLang's overlap scheduler), so a step takes the
            longer of its GPU and host times instead of their sum.
    """

    max_running: int
    token_budget: int
    block_size: int
    chunked_prefill: bool
    prefix_cache: PrefixCache
    max_len: int
    tensor_parallel_size: int
    kv_cache_dtype: str
    memory_fraction: float
    enforce_eager: bool
    quantization: str | None = None
    overlaps_host: bool = False
