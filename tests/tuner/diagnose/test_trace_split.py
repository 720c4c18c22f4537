"""The time split, launch statistics and kernel table on traces with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trace_builder import SPLIT_KEYS, TraceBuilder

from slotune.tuner.diagnose import diagnose_trace

MEMCPY = "gpu_memcpy"


def test_memcpy_overlapping_a_kernel_on_another_stream(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 5, [(10, 100)])  # kernel 10..110
    t.launch(
        5,
        5,
        [(60, 100)],
        name="cudaMemcpyAsync",
        kernel="Memcpy HtoD (Pinned -> Device)",
        cat=MEMCPY,
        stream=8,
        nbytes=2e6,
    )  # 60..160: 50 overlapped, 50 exposed
    t.launch(20, 5, [(210, 100)])  # idle 160..210, kernel 210..310
    d = diagnose_trace(t.write(tmp_path / "t.json"))
    o = d.overall
    assert o.total_ms == pytest.approx(0.300)
    assert o.busy_ms == pytest.approx(0.250)
    assert o.compute_ms == pytest.approx(0.200)
    assert o.exposed_memcpy_ms == pytest.approx(0.050)
    assert o.overlapped_memcpy_ms == pytest.approx(0.050)
    assert o.idle_ms == pytest.approx(0.050)
    htod = o.memcpy["HtoD"]
    assert (htod.exposed_ms, htod.overlapped_ms, htod.num_bytes) == pytest.approx((0.05, 0.05, 2e6))
    assert htod.to_dict()["gb_per_s"] == pytest.approx(20.0)


def test_streams_merge_into_one_busy_timeline(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 2, [(0, 100)], stream=7)
    t.launch(1, 2, [(50, 70)], stream=8)  # 50..120 overlaps the first
    t.launch(2, 2, [(60, 10)], stream=9)  # inside both
    o = diagnose_trace(t.write(tmp_path / "t.json")).overall
    assert (o.total_ms, o.busy_ms, o.compute_ms, o.idle_ms) == pytest.approx((0.12, 0.12, 0.12, 0))


def test_float_timestamps_and_negative_or_zero_durations(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.launch(0.25, 1.5, [(1000.5, 10.25)])
    t.launch(2.25, 1.5, [(1010.75, -0.001)])  # rounding: a negative duration counts as zero
    t.launch(3.25, 1.5, [(1005.125, 0.0)])
    t.launch(4.25, 1.5, [(1020.5, 4.5)])
    d = diagnose_trace(t.write(tmp_path / "t.json"))
    o = d.overall
    assert o.total_ms == pytest.approx(0.0245)
    assert o.busy_ms == pytest.approx(0.01475)
    assert o.idle_ms == pytest.approx(0.00975)
    assert min(w.total_ms for w in (o, *d.windows)) >= 0
    assert d.launch.num_short_kernels == 3  # 0, 0 and 4.5 µs


def test_communication_exposed_and_overlapped(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 1, [(0, 100)], kernel="ncclDevKernel_AllReduce_Sum_bf16_RING_LL", stream=20)
    t.launch(1, 1, [(30, 30)], stream=7)
    o = diagnose_trace(t.write(tmp_path / "t.json")).overall
    assert o.compute_ms == pytest.approx(0.030)
    assert o.exposed_comm_ms == pytest.approx(0.070)
    assert o.overlapped_comm_ms == pytest.approx(0.030)


def test_memset_counts_as_compute_unless_separate(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 1, [(0, 10)], name="cudaMemsetAsync", kernel="Memset (Device)", cat="gpu_memset")
    t.launch(1, 1, [(20, 30)])
    path = t.write(tmp_path / "t.json")
    merged = diagnose_trace(path).overall
    apart = diagnose_trace(path, memset_separate=True).overall
    assert merged.compute_ms == pytest.approx(0.040)
    assert merged.exposed_memset_ms is None
    assert apart.compute_ms == pytest.approx(0.030)
    assert apart.exposed_memset_ms == pytest.approx(0.010)
    assert apart.busy_ms == merged.busy_ms


def test_graph_launch_owns_many_kernels_through_one_correlation(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 10, [(20, 5), (25, 5), (30, 10)], name="cudaGraphLaunch")
    t.launch(50, 4, [(60, 40)], name="cudaLaunchKernelExC")
    launch = diagnose_trace(t.write(tmp_path / "t.json")).launch
    assert launch.num_graph_launches == 1
    assert launch.num_kernel_launches == 1
    assert launch.num_graph_kernels == 3
    assert launch.num_kernels == 4
    # delays: 20 - (0 + 10) = 10 for the graph (its first kernel), 60 - 54 = 6
    assert launch.launch_delay.count == 2
    assert launch.launch_delay.max_us == pytest.approx(10)
    assert launch.launch_delay.mean_us == pytest.approx(8)
    assert launch.launch_cpu_ms == pytest.approx(0.014)
    assert launch.num_short_kernels == 2
    assert launch.short_kernel_busy_share == pytest.approx(10 / 60)


def test_rocm_launch_names(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 3, [(5, 10)], name="hipLaunchKernel", kernel="Cijk_Ailk_Bljk_BBS_BH_MT128x128")
    t.launch(3, 3, [(20, 10)], name="hipExtModuleLaunchKernel", kernel="rcclKernel_AllReduce")
    t.launch(6, 3, [(40, 10)], name="hipGraphLaunch")
    d = diagnose_trace(t.write(tmp_path / "t.json"))
    assert d.launch.num_kernel_launches == 2
    assert d.launch.num_graph_launches == 1
    assert d.launch.launch_delay.count == 3
    assert d.overall.exposed_comm_ms == pytest.approx(0.010)
    assert {k.name: k.category.value for k in d.kernels}[
        "Cijk_Ailk_Bljk_BBS_BH_MT128x128"
    ] == "GEMM"


def test_idle_while_the_host_launches_is_attributed_to_the_host(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 5, [(10, 20)])  # GPU 10..30
    t.launch(30, 40, [(75, 10)])  # CPU in the launch 30..70 while the GPU waits 30..75
    o = diagnose_trace(t.write(tmp_path / "t.json")).overall
    assert o.idle_ms == pytest.approx(0.045)
    assert o.host_idle_ms == pytest.approx(0.040)


def test_gpu_annotated_steps_are_windows(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.step("ProfilerStep#1", 0, 100, gpu=True)
    t.step("ProfilerStep#2", 100, 100, gpu=True)
    t.launch(0, 1, [(0, 60)])
    t.launch(1, 1, [(100, 20)])
    d = diagnose_trace(t.write(tmp_path / "t.json"))
    assert d.steps_on_gpu
    assert [(w.name, w.total_ms, w.compute_ms, w.idle_ms) for w in d.windows] == [
        ("ProfilerStep#1", pytest.approx(0.1), pytest.approx(0.06), pytest.approx(0.04)),
        ("ProfilerStep#2", pytest.approx(0.1), pytest.approx(0.02), pytest.approx(0.08)),
    ]
    assert d.to_dict()["windows"][0]["name"] == "ProfilerStep#1"


def test_cpu_steps_own_the_gpu_work_they_launched(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.step("ProfilerStep#7", 0, 50, gpu=False)
    t.step("ProfilerStep#8", 50, 50, gpu=False)
    t.launch(10, 5, [(100, 30)])  # launched in step 7, runs later
    t.launch(60, 5, [(140, 10), (160, 10)], name="cudaGraphLaunch")
    d = diagnose_trace(t.write(tmp_path / "t.json"))
    assert not d.steps_on_gpu
    assert [(w.name, w.total_ms, w.busy_ms) for w in d.windows] == [
        ("ProfilerStep#7", pytest.approx(0.03), pytest.approx(0.03)),
        ("ProfilerStep#8", pytest.approx(0.03), pytest.approx(0.02)),
    ]


def test_directory_of_ranks_adds_devices(tmp_path: Path) -> None:
    for rank in (0, 1):
        t = TraceBuilder(rank=rank, world_size=2)
        t.launch(0, 1, [(10, 50)])
        t.write(tmp_path / f"rank{rank}.json.gz")
    d = diagnose_trace(tmp_path)
    assert d.num_devices == 2
    assert d.overall.compute_ms == pytest.approx(0.1)
    assert d.kernels[0].count == 2


def test_kernel_categories_and_json_shape(tmp_path: Path) -> None:
    t = TraceBuilder()
    names = {
        "flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits>": "attention",
        "sm90_xmma_gemm_bf16bf16_bf16f32": "GEMM",
        "void at::native::vectorized_elementwise_kernel<4, at::native::silu>": "elementwise",
        "void at::native::reduce_kernel<512, 1>": "reduce",
        "ncclDevKernel_AllGather_RING_LL": "communication",
        "my_custom_thing": "other",
    }
    for i, name in enumerate(names):
        t.launch(i * 10, 1, [(i * 100, 50 + i)], kernel=name)
    data = diagnose_trace(t.write(tmp_path / "t.json"), top=3).to_dict()
    for key in ("overall", "windows", "kernels", "findings"):
        assert key in data
    assert data["overall"].keys() >= SPLIT_KEYS
    assert len(data["kernels"]) == 3
    assert data["kernels"][0]["name"] == "my_custom_thing"  # longest
    full = diagnose_trace(tmp_path / "t.json", top=10)
    assert {k.name: k.category.value for k in full.kernels} == names


def test_directory_of_traces_without_distributed_info(tmp_path: Path) -> None:
    for i in range(2):  # e.g. two processes of one node, profiled without a process group
        t = TraceBuilder()
        t.launch(0, 1, [(10, 20)])
        doc = t.document()
        del doc["distributedInfo"]
        (tmp_path / f"worker{i}.json").write_text(json.dumps(doc))
    assert diagnose_trace(tmp_path).overall.compute_ms == pytest.approx(0.04)


def test_flop_rate_of_kernels_from_their_cpu_operators_flops(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.launch(0, 1, [(10, 100)], kernel="sm90_gemm")  # corr 1
    t.launch(2, 1, [(110, 300)], kernel="sm90_gemm")  # corr 2
    t.launch(3, 1, [(410, 100)], kernel="splitk_reduce_kernel")  # corr 3, same operator as 2
    for ev in t.events:
        corr = ev["args"].get("correlation")
        if ev["cat"] == "kernel":
            ev["args"]["External id"] = 7 if corr == 1 else 8
    t.events += [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 100,
            "tid": 100,
            "ts": 0,
            "dur": 2,
            "args": {"External id": 7, "flops": 1e9},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 100,
            "tid": 100,
            "ts": 2,
            "dur": 2,
            "args": {"External id": 8, "flops": 4e9},
        },
    ]
    rows = {k.name: k for k in diagnose_trace(t.write(tmp_path / "t.json")).kernels}
    # gemm: 1e9 in 100 µs + 3e9 (300/400 of 4e9) in 300 µs = 4e9 FLOP in 400 µs = 10 TFLOP/s
    assert rows["sm90_gemm"].tflop_per_s == pytest.approx(10.0)
    assert rows["splitk_reduce_kernel"].tflop_per_s == pytest.approx(10.0)  # 1e9 in 100 µs
    t2 = TraceBuilder()
    t2.launch(0, 1, [(10, 100)])
    assert diagnose_trace(t2.write(tmp_path / "u.json")).kernels[0].tflop_per_s is None
