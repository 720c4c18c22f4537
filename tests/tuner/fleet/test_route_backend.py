"""A backend's load as the policies see it, from engine /metrics text (vLLM and SGLang names)."""

from __future__ import annotations

from slotune.collector.agent.base import Scrape, SourceKind
from slotune.collector.agent.promsource import PromTextSource
from slotune.collector.agent.promtext import PromTextParser
from slotune.collector.agent.sglang import SglangSource
from slotune.collector.agent.trtllm import TrtllmSource
from slotune.collector.agent.vllm import VllmSource
from slotune.tuner.fleet.route_backend import Backend
from slotune.tuner.fleet.route_config import BackendSpec, BreakerSettings

VLLM = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m"}} {running}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.25
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="m"}} {prompt}
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="m"}} {generated}
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}} {finished}
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="m"}} 1
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="16",num_gpu_blocks="{blocks}",model_name="m"}} 1
"""


def _backend(kind: SourceKind = SourceKind.VLLM) -> Backend:
    return Backend(BackendSpec("b", "http://h:1", "p", "m", kind), BreakerSettings())


def _scrape(text: str, source: PromTextSource) -> Scrape:
    return source.from_families(list(PromTextParser().parse(text, source="t").families))


def test_vllm_load_and_rates() -> None:
    b, src = _backend(), VllmSource(["x"])

    def read(at: float, running: int, waiting: int, prompt: int, generated: int) -> None:
        finished = generated // 100
        text = VLLM.format(
            running=running,
            waiting=waiting,
            prompt=prompt,
            generated=generated,
            finished=finished,
            blocks=1000,
        )
        b.update_load(_scrape(text, src), at)

    read(10.0, running=3, waiting=0, prompt=1000, generated=500)
    quick = b.on_send()  # sent after the read: the engine has not reported it yet
    b.on_send()
    state = b.replica_state()
    assert (state.num_running, state.num_waiting, state.kv_usage) == (3, 2, 0.25)
    assert state.kv_capacity_tokens == 16 * 1000
    b.on_end(quick, ok=True)  # over before the next read: no longer load
    assert b.replica_state().num_waiting == 1
    # no queue yet: the token rate is the traffic, not the capacity, and is not taken
    read(12.0, running=4, waiting=2, prompt=3000, generated=1500)
    state = b.replica_state()
    assert (state.num_running, state.num_waiting) == (4, 2)
    assert (state.throughput_tps, state.prefill_tps) == (0.0, 0.0)
    read(14.0, running=4, waiting=3, prompt=7000, generated=2500)  # queued all along
    state = b.replica_state()
    assert state.throughput_tps == (4000 + 1000) / 2
    assert state.prefill_tps == 2000.0
    assert state.start_rate_rps == 10 / 2  # requests finished: a waiting one takes each slot
    read(16.0, running=4, waiting=1, prompt=8000, generated=3500)
    assert b.replica_state().prefill_tps == 2000.0 + 0.3 * (500.0 - 2000.0)  # smoothed
    # a restarted engine (counters back to zero) gives no rate rather than a negative one
    read(17.0, running=0, waiting=5, prompt=10, generated=5)
    assert b.replica_state().throughput_tps == 2500.0 + 0.3 * (1000.0 - 2500.0)  # unchanged


def test_sglang_names_and_waiting_prompt_tokens() -> None:
    b, src = _backend(SourceKind.SGLANG), SglangSource(["x"])
    text = (
        "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 7\n"
        "# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs 5\n"
        "# TYPE sglang:token_usage gauge\nsglang:token_usage 0.5\n"
    )
    b.update_load(_scrape(text, src), 1.0)
    first, second = b.queue_prompt(300), b.queue_prompt(200)
    state = b.replica_state()
    assert (state.num_running, state.num_waiting, state.kv_usage) == (7, 5, 0.5)
    assert state.num_waiting_tokens == 500
    first.release()
    first.release()  # idempotent: the proxy releases on the first token and again at the end
    assert b.replica_state().num_waiting_tokens == 200
    second.release()
    assert b.replica_state().num_waiting_tokens == 0


def test_trtllm_iteration_stats() -> None:
    b, src = _backend(SourceKind.TRTLLM), TrtllmSource(["x"])
    stats = [
        {
            "iterLatencyMS": 12.0,
            "numActiveRequests": 9,
            "numQueuedRequests": 4,
            "kvCacheStats": {"usedNumBlocks": 300, "maxNumBlocks": 1000},
        }
    ]
    raw, canonical = src.from_iteration_stats(stats)
    b.update_load(Scrape(raw, canonical), 1.0)
    state = b.replica_state()
    assert (state.num_running, state.num_waiting, state.kv_usage) == (9, 4, 0.3)
