"""Every source against its real material: raw series kept, canonical names and units right."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from agent_helpers import DATA, data_text
from hypothesis import given, settings
from hypothesis import strategies as st

from slotune.collector.agent.base import Family, MetricType, Response, Scrape
from slotune.collector.agent.dcgm import DcgmSource, is_blank, parse_counters_csv
from slotune.collector.agent.promsource import PromTextSource
from slotune.collector.agent.promtext import parse_text
from slotune.collector.agent.sglang import SglangSource
from slotune.collector.agent.trtllm import TrtllmSource, parse_iteration_stats
from slotune.collector.agent.vllm import VllmSource
from slotune.collector.errors import SourceError

SOURCE_OF = {"vllm": VllmSource, "sglang": SglangSource, "trtllm": TrtllmSource, "dcgm": DcgmSource}


class FileFetcher:
    """Serves literal bodies by URL (the sources' HTTP seam)."""

    def __init__(self, bodies: dict[str, str]) -> None:
        self.bodies = bodies

    async def get(self, url: str) -> Response:
        return Response(self.bodies[url])


def scrape_file(name: str) -> Scrape:
    source = SOURCE_OF[name.split("_")[0]]([name])
    return asyncio.run(source.collect(FileFetcher({name: data_text(name)})))


def canonical(scrape: Scrape) -> dict[str, Family]:
    return {f.name: f for f in scrape.canonical}


def values(fam: Family) -> list[float]:
    return [s.value for s in fam.samples]


EXPECTED_CANONICAL = {
    "dcgm_exporter_issue250_v100_excerpt.prom": {"gpu_utilization", "power_limit_watts"},
    "dcgm_exporter_readme_quickstart.prom": {"sm_clock_hz", "memory_clock_hz"},
    "dcgm_exporter_tesla_t4_prof_excerpt.prom": {
        "vram_used",
        "pcie_tx_bytes_per_second",
        "pcie_rx_bytes_per_second",
        "graphics_engine_active",
        "tensor_active",
        "dram_active",
    },
    "sglang_production_metrics_doc.prom": {
        "ttft",
        "e2e",
        "itl",
        "requests_running",
        "requests_waiting",
        "kv_usage",
        "prefix_hit_rate",
        "prompt_tokens",
        "prefix_queries",
        "generation_tokens",
    },
    "trtllm_prometheus_dynamo_doc_example.prom": {
        "ttft",
        "tpot",
        "e2e",
        "queue_time",
        "requests_finished",
    },
    "trtllm_prometheus_pr5785_excerpt.prom": {"requests_finished"},
    "vllm_usage_doc_iteration_tokens_excerpt.prom": {"iteration_tokens"},
    "vllm_v0_issue8819_ttft_excerpt.prom": {"ttft"},
    "vllm_v1_design_doc_example.prom": {
        "ttft",
        "requests_running",
        "generation_tokens",
        "requests_finished",
    },
}


def test_every_exposition_file_is_covered() -> None:
    exporters = {p.name for p in DATA.glob("*.prom") if p.name.split("_")[0] in SOURCE_OF}
    assert set(EXPECTED_CANONICAL) == exporters


@pytest.mark.parametrize("name", sorted(EXPECTED_CANONICAL))
def test_every_file_keeps_raw_series_and_maps_canonical_ones(name: str) -> None:
    scrape = scrape_file(name)
    assert scrape.raw, "raw series are kept"
    assert {f.name for f in scrape.canonical} == EXPECTED_CANONICAL[name]


def test_vllm_v1_names_and_labels() -> None:
    c = canonical(scrape_file("vllm_v1_design_doc_example.prom"))
    assert values(c["requests_running"]) == [8.0]
    assert values(c["generation_tokens"]) == [27453.0]
    assert {s.label("finished_reason") for s in c["requests_finished"].samples} == {
        "stop",
        "length",
        "abort",
    }
    ttft = c["ttft"]
    assert ttft.type is MetricType.HISTOGRAM
    assert ("ttft_count", 140.0) in [(s.name, s.value) for s in ttft.samples]
    assert all(s.label("model_name") == "meta-llama/Llama-3.1-8B-Instruct" for s in ttft.samples)


def test_vllm_prefers_new_names_and_maps_old_ones() -> None:
    both = (
        'vllm:kv_cache_usage_perc{engine="0"} 0.25\n'
        'vllm:gpu_cache_usage_perc{engine="0"} 0.5\n'
        "# TYPE vllm:gpu_prefix_cache_queries_total counter\n"
        "vllm:gpu_prefix_cache_queries_total 100\n"
        "# TYPE vllm:gpu_prefix_cache_hits_total counter\n"
        "vllm:gpu_prefix_cache_hits_total 40\n"
        "# TYPE vllm:time_per_output_token_seconds histogram\n"
        'vllm:time_per_output_token_seconds_bucket{le="0.01"} 3\n'
        'vllm:time_per_output_token_seconds_bucket{le="+Inf"} 4\n'
        "vllm:time_per_output_token_seconds_count 4\n"
        "vllm:time_per_output_token_seconds_sum 0.05\n"
    )
    scrape = VllmSource().from_families(list(parse_text(both).families))
    c = canonical(scrape)
    assert values(c["kv_usage"]) == [0.25]
    assert values(c["prefix_queries"]) == [100.0]
    assert values(c["prefix_hits"]) == [40.0]
    assert "itl" in c and "tpot" not in c  # the old name observed ITL, not per-request TPOT


def test_sglang_old_names() -> None:
    c = canonical(scrape_file("sglang_production_metrics_doc.prom"))
    assert values(c["kv_usage"]) == [0.28]
    assert values(c["requests_waiting"]) == [2826.0]
    assert values(c["prefix_hit_rate"]) == [pytest.approx(0.0075075526)]
    assert "itl" in c and "tpot" not in c  # old time_per_output_token counts tokens


def test_sglang_new_names_keep_tp_rank_and_map_tpot() -> None:
    text = (
        "# TYPE sglang:inter_token_latency_seconds histogram\n"
        "sglang:inter_token_latency_seconds_bucket"
        '{le="+Inf",tp_rank="0",engine_type="unified"} 9\n'
        'sglang:inter_token_latency_seconds_count{tp_rank="0",engine_type="unified"} 9\n'
        "# TYPE sglang:time_per_output_token_seconds histogram\n"
        'sglang:time_per_output_token_seconds_bucket{le="+Inf",tp_rank="0"} 2\n'
        'sglang:time_per_output_token_seconds_count{tp_rank="0"} 2\n'
        "# TYPE sglang:num_retracted_requests_total counter\n"
        'sglang:num_retracted_requests_total{tp_rank="0"} 3\n'
    )
    c = canonical(SglangSource().from_families(list(parse_text(text).families)))
    assert c["itl"].samples[0].label("engine_type") == "unified"
    assert c["tpot"].samples[0].label("tp_rank") == "0"
    assert values(c["preemptions"]) == [3.0]


def test_sglang_0_5_request_tpot_is_tpot() -> None:
    text = Path(__file__).parents[2].joinpath("data/sglang/metrics-0.5.23.txt").read_text()
    c = canonical(SglangSource().from_families(list(parse_text(text).families)))
    assert c["tpot"].type is MetricType.HISTOGRAM
    assert {s.label("model_name") for s in c["tpot"].samples} == {"tiny-llama"}
    assert "itl" in c and "ttft" in c


def test_trtllm_prefixed_and_unprefixed_prometheus_names() -> None:
    new = canonical(scrape_file("trtllm_prometheus_dynamo_doc_example.prom"))
    assert sum(values(new["requests_finished"])) == 155.0
    assert {"ttft", "tpot", "e2e", "queue_time"} <= set(new)
    old = canonical(scrape_file("trtllm_prometheus_pr5785_excerpt.prom"))
    assert values(old["requests_finished"]) == [2.0]


def test_trtllm_json_doc_excerpts_skip_elisions_and_map_kv_usage() -> None:
    elements, skipped = parse_iteration_stats(
        data_text("trtllm_serve_metrics_iteration_stats_doc_current.jsonish")
    )
    assert [s.line_no for s in skipped] == [18]
    raw, c = TrtllmSource().from_iteration_stats(elements)
    got = {f.name: values(f) for f in c}
    assert got["kv_usage"] == [pytest.approx(3 / 101256)]
    assert got["vram_used"] == [76665782272.0]
    assert got["prefix_hits"] == [4.0] and got["prefix_queries"] == [3125.0]
    assert any(f.name == "trtllm_json:kvCacheStats.usedNumBlocks" for f in raw)
    older, skipped = parse_iteration_stats(
        data_text("trtllm_serve_metrics_iteration_stats_doc_older.jsonish")
    )
    assert len(older) == 1 and len(skipped) == 2


def test_trtllm_reads_every_drained_element_across_gets() -> None:
    batches = [
        [{"iter": i, "iterLatencyMS": 4.0, "numActiveRequests": i} for i in range(3)],
        [],
        [{"iter": 3, "iterLatencyMS": 30.0, "numActiveRequests": 7}],
    ]
    source = TrtllmSource(["http://e/metrics"])
    scrapes = []
    for batch in batches:
        fetch = FileFetcher({"http://e/metrics": json.dumps(batch)})
        scrapes.append(canonical(asyncio.run(source.collect(fetch))))
    assert [values(s["iterations"]) for s in scrapes] == [[3.0], [3.0], [4.0]]
    assert "requests_running" not in scrapes[1]  # idle GET: no stale gauge
    assert values(scrapes[2]["requests_running"]) == [7.0]
    latency = {
        s.name: s.value
        for s in scrapes[2]["iteration_latency"].samples
        if s.name != "iteration_latency_bucket"
    }
    assert latency == {
        "iteration_latency_sum": pytest.approx(0.042),
        "iteration_latency_count": 4.0,
    }


def test_dcgm_units_labels_blank_values_and_types_from_csv() -> None:
    c = canonical(scrape_file("dcgm_exporter_tesla_t4_prof_excerpt.prom"))
    (used,) = c["vram_used"].samples
    assert used.value == 5120 * 1024 * 1024
    assert used.label("hostname") == "cp-bm14r7" and used.label("gpu_model") == "Tesla T4"
    quick = scrape_file("dcgm_exporter_readme_quickstart.prom")
    temp = next(f for f in quick.raw if f.name == "DCGM_FI_DEV_MEMORY_TEMP")
    assert temp.samples == ()  # 9223372036854775794 is DCGM_INT64_NOT_SUPPORTED
    assert values(canonical(quick)["sm_clock_hz"]) == [139e6]
    v100 = scrape_file("dcgm_exporter_issue250_v100_excerpt.prom")
    assert canonical(v100)["gpu_utilization"].samples[0].label("hostname") == "r6i3n0"
    t4 = scrape_file("dcgm_exporter_tesla_t4_prof_excerpt.prom")
    assert next(f for f in t4.raw if f.name == "DCGM_FI_DEV_FB_USED").type is MetricType.GAUGE


def test_dcgm_mig_labels_lowercase_hostname_and_vram_total() -> None:
    labels = 'gpu="0",UUID="GPU-1",hostname="n1",GPU_I_PROFILE="1g.10gb",GPU_I_ID="3"'
    text = (
        f"DCGM_FI_DEV_FB_USED{{{labels}}} 1024\nDCGM_FI_DEV_FB_FREE{{{labels}}} 8192\n"
        f"DCGM_FI_DEV_FB_RESERVED{{{labels}}} 16\n"
        f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 2147483632\n"
    )
    c = canonical(DcgmSource().from_families(list(parse_text(text).families)))
    (total,) = c["vram_total"].samples
    assert total.value == (1024 + 8192 + 16) * 1024 * 1024
    assert dict(total.labels) == {
        "gpu": "0",
        "uuid": "GPU-1",
        "hostname": "n1",
        "mig_profile": "1g.10gb",
        "mig_instance": "3",
    }
    assert "gpu_utilization" not in c  # DCGM_INT32_BLANK


def test_dcgm_counters_csv() -> None:
    types = parse_counters_csv(data_text("dcgm_exporter_default-counters.csv"))
    assert types["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] is MetricType.COUNTER
    assert types["DCGM_FI_DEV_DEC_UTIL"] is MetricType.GAUGE
    assert "DCGM_FI_DRIVER_VERSION" not in types and "DCGM_FI_PROF_SM_ACTIVE" not in types


def test_blank_sentinels() -> None:
    assert is_blank(2147483632) and is_blank(2147483635) and is_blank(140737488355328.0)
    assert is_blank(float(9223372036854775794))
    assert not is_blank(0.0) and not is_blank(700.0) and not is_blank(2147483631)


@pytest.mark.parametrize("source_cls", [VllmSource, SglangSource, TrtllmSource, DcgmSource])
@settings(max_examples=60, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list('vlm:_tsDCGM{}="01.9e+ \n#TYPEcounterhistogrambucketle'))
    )
)
def test_fuzz_every_prometheus_source(source_cls: type[PromTextSource], text: str) -> None:
    try:
        scrape = asyncio.run(source_cls(["u"]).collect(FileFetcher({"u": text})))
    except SourceError:
        return
    assert isinstance(scrape, Scrape)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.recursive(
            st.none()
            | st.booleans()
            | st.floats(allow_nan=True)
            | st.integers()
            | st.text(max_size=5),
            lambda children: (
                st.lists(children, max_size=4)
                | st.dictionaries(
                    st.sampled_from(
                        [
                            "iter",
                            "iterLatencyMS",
                            "kvCacheStats",
                            "usedNumBlocks",
                            "maxNumBlocks",
                            "gpuMemUsage",
                            "reusedBlocks",
                            "missedBlocks",
                            "numActiveRequests",
                        ]
                    ),
                    children,
                    max_size=5,
                )
            ),
            max_leaves=20,
        ).map(json.dumps),
    )
)
def test_fuzz_trtllm_iteration_stats(text: str) -> None:
    try:
        elements, _ = parse_iteration_stats(text)
    except SourceError:
        return
    TrtllmSource().from_iteration_stats(elements)


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_fuzz_dcgm_counters_csv(text: str) -> None:
    assert all(isinstance(t, MetricType) for t in parse_counters_csv(text).values())


def test_an_unchanged_exposition_maps_to_the_same_scrape_and_a_change_shows() -> None:
    body = data_text("vllm_v1_design_doc_example.prom")
    source = VllmSource(["m"])
    first = asyncio.run(source.collect(FileFetcher({"m": body})))
    assert asyncio.run(source.collect(FileFetcher({"m": body}))) is first
    line = next(x for x in body.splitlines() if x.startswith("vllm:num_requests_running"))
    changed_body = body.replace(line, line.rsplit(" ", 1)[0] + " 42")
    changed = asyncio.run(source.collect(FileFetcher({"m": changed_body})))
    assert values(canonical(changed)["requests_running"]) == [42.0]
    assert canonical(changed)["ttft"] == canonical(first)["ttft"]
