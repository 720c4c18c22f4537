"""Load a profiler trace (file or directory of per-rank files) into compact per-device arrays.

What is kept of each event is only what the analyses read: GPU operations (kernels, memcpy,
memset) with their interval, kind, correlation id, name and bytes; CUDA/HIP runtime calls
(launches, graph launches, synchronisations) with their interval and correlation id; and the
``ProfilerStep#N`` windows, from the GPU-side annotation when the trace has one, else the CPU
one. Everything else (CPU operators, flows, metadata events) is skipped while streaming.

Timestamps are microseconds, integer or float; a negative duration (float rounding in some
Kineto versions) counts as zero, so it can never make a busy timeline run backwards.
"""

from __future__ import annotations

import itertools
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Annotated

import msgspec
import numpy as np
import numpy.typing as npt

from slotune.tuner.diagnose._reader import RawArgs, RawEvent, TraceFileError, TraceStream

KNOWN_SCHEMA_VERSIONS = (1,)
_STEP_PREFIX = "ProfilerStep#"
_MAX_RANKS = 1 << 20


class OpKind(IntEnum):
    """What a GPU operation does; memcpy kinds carry their direction."""

    COMPUTE = 0
    COMM = 1
    MEMSET = 2
    HTOD = 3
    DTOH = 4
    DTOD = 5
    PTOP = 6
    MEMCPY_OTHER = 7


MEMCPY_KINDS = (OpKind.HTOD, OpKind.DTOH, OpKind.DTOD, OpKind.PTOP, OpKind.MEMCPY_OTHER)
_DIRECTIONS = {"HtoD": OpKind.HTOD, "DtoH": OpKind.DTOH, "DtoD": OpKind.DTOD, "PtoP": OpKind.PTOP}


class CallKind(IntEnum):
    """What a runtime call on the CPU is, for launch statistics."""

    LAUNCH = 0  # one kernel
    GRAPH = 1  # a captured graph: many kernels under one correlation
    SYNC = 2  # the CPU waits for the GPU


LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipLaunchCooperativeKernel",
    }
)
GRAPH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "hipMemcpy",
    }
)
_CALL_KIND = (
    dict.fromkeys(LAUNCH_CALLS, CallKind.LAUNCH)
    | dict.fromkeys(GRAPH_CALLS, CallKind.GRAPH)
    | dict.fromkeys(SYNC_CALLS, CallKind.SYNC)
)
# Kineto's categories, and the capitalised ones of PyTorch 1.8's first Kineto traces.
_GPU_CATS = {
    "kernel": 0,
    "Kernel": 0,
    "gpu_memcpy": 1,
    "Memcpy": 1,
    "gpu_memset": 2,
    "Memset": 2,
}
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "hip_runtime"})
_NO_ARGS = RawArgs()
_STEP_CATS = frozenset({"user_annotation", "gpu_user_annotation", "cpu_op", "Operator"})
_COMM_MARKERS = ("nccl", "rccl")

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Window:
    """A named span of the GPU timeline (a profiler step), in µs."""

    name: str
    start_us: float
    end_us: float


@dataclass(frozen=True, slots=True)
class DeviceTrace:
    """The GPU operations of one device of one rank, and the host calls that fed it.

    ``rank`` is None when the trace carries no ``distributedInfo`` (a single process).

    Arrays of one group have one entry per operation / call; ``op_name`` indexes ``names``.
    """

    source: str
    rank: int | None
    device: int
    names: tuple[str, ...]
    op_start: F64
    op_end: F64
    op_kind: npt.NDArray[np.int8]
    op_corr: I64
    op_name: npt.NDArray[np.int32]
    op_bytes: F64
    op_flops: F64
    call_start: F64
    call_end: F64
    call_kind: npt.NDArray[np.int8]
    call_corr: I64
    windows: tuple[Window, ...]
    steps_on_gpu: bool


@dataclass
class _Builder:
    """Growable columns for one device while a file streams (arrays, not dicts: ~8 B a field)."""

    op_start: array[float] = field(default_factory=lambda: array("d"))
    op_end: array[float] = field(default_factory=lambda: array("d"))
    op_kind: array[int] = field(default_factory=lambda: array("b"))
    op_corr: array[int] = field(default_factory=lambda: array("q"))
    op_name: array[int] = field(default_factory=lambda: array("i"))
    op_bytes: array[float] = field(default_factory=lambda: array("d"))
    op_ext: array[int] = field(default_factory=lambda: array("q"))
    gpu_steps: list[Window] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FileInfo:
    """What one file says about the run it belongs to."""

    path: Path
    rank: int | None
    world_size: int | None
    start_us: float
    end_us: float


def load_trace(path: Path) -> list[DeviceTrace]:
    """Every device timeline of a trace file, or of a directory of per-rank trace files.

    Raises:
        TraceFileError: unreadable or truncated JSON, no GPU events, no correlation ids, an
            unknown profiler version, or a directory mixing ranks of different runs.
    """
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.name.endswith((".json", ".json.gz")))
        if not files:
            raise TraceFileError(f"{path}: no .json or .json.gz trace files in this directory")
    elif path.exists():
        files = [path]
    else:
        raise TraceFileError(f"{path}: no such file or directory; check the path")
    loaded = [_load_file(p) for p in files]
    _check_one_run(path, [info for info, _ in loaded])
    return [device for _, devices in loaded for device in devices]


def _load_file(path: Path) -> tuple[FileInfo, list[DeviceTrace]]:
    stream = TraceStream(path)
    names: dict[str, int] = {}
    devices: dict[int, _Builder] = defaultdict(_Builder)
    calls = (array("d"), array("d"), array("b"), array("q"))
    cpu_steps: list[Window] = []
    flops: dict[int, float] = {}  # External id -> FLOPs of the CPU operator
    num_gpu_events = num_correlated = 0
    for ev in itertools.chain.from_iterable(stream.batches()):
        # Dispatch on the category first: most events (CPU operators, flows, Python
        # functions) are dropped after one dictionary lookup.
        cat = ev.cat
        gpu_cat = _GPU_CATS.get(cat)
        if gpu_cat is not None:
            if ev.ph != "X":
                continue
            args = ev.args or _NO_ARGS
            num_gpu_events += 1
            corr = args.correlation
            if corr is not None:
                num_correlated += 1
            b = devices[_device_of(ev)]
            b.op_start.append(ev.ts)
            b.op_end.append(ev.ts + max(ev.dur, 0.0))
            b.op_kind.append(_op_kind(gpu_cat, ev.name))
            b.op_corr.append(corr if corr is not None else -1)
            b.op_name.append(names.setdefault(ev.name, len(names)))
            b.op_bytes.append(args.bytes)
            b.op_ext.append(args.external_id if args.external_id is not None else -1)
        elif cat in _RUNTIME_CATS:
            kind = _CALL_KIND.get(ev.name)
            if kind is None or ev.ph != "X":
                continue
            corr = (ev.args or _NO_ARGS).correlation
            calls[0].append(ev.ts)
            calls[1].append(ev.ts + max(ev.dur, 0.0))
            calls[2].append(kind)
            calls[3].append(corr if corr is not None else -1)
        elif cat in _STEP_CATS:
            args = ev.args or _NO_ARGS
            if args.flops > 0 and args.external_id is not None:
                flops[args.external_id] = flops.get(args.external_id, 0.0) + args.flops
            if not ev.name.startswith(_STEP_PREFIX) or ev.ph != "X":
                continue
            step = Window(ev.name, ev.ts, ev.ts + max(ev.dur, 0.0))
            if cat == "gpu_user_annotation":
                devices[_device_of(ev)].gpu_steps.append(step)
            else:
                cpu_steps.append(step)
    info = _check_file(stream, num_gpu_events, num_correlated)
    name_list = tuple(names)
    result = [
        _freeze(path, info.rank, device, b, name_list, calls, cpu_steps, flops)
        for device, b in sorted(devices.items())
        if len(b.op_start)
    ]
    starts = [float(d.op_start.min()) for d in result]
    ends = [float(d.op_end.max()) for d in result]
    return (
        FileInfo(path, info.rank, info.world_size, min(starts), max(ends)),
        result,
    )


def _device_of(ev: RawEvent) -> int:
    """The GPU an event ran on: ``args.device``, else the pid Kineto gives GPU rows."""
    if ev.args is not None and ev.args.device is not None:
        return ev.args.device
    return ev.pid if isinstance(ev.pid, int) else 0


def _op_kind(gpu_cat: int, name: str) -> OpKind:
    if gpu_cat == 1:
        # "Memcpy HtoD (Pageable -> Device)": the direction is the second word.
        parts = name.split(" ", 2)
        return (
            _DIRECTIONS.get(parts[1], OpKind.MEMCPY_OTHER)
            if len(parts) > 1
            else OpKind.MEMCPY_OTHER
        )
    if gpu_cat == 2:
        return OpKind.MEMSET
    lowered = name.lower()
    return OpKind.COMM if any(m in lowered for m in _COMM_MARKERS) else OpKind.COMPUTE


@dataclass(frozen=True, slots=True)
class _FileCheck:
    rank: int | None
    world_size: int | None


def _check_file(stream: TraceStream, num_gpu_events: int, num_correlated: int) -> _FileCheck:
    path, meta = stream.path, stream.metadata
    version = meta.get("schemaVersion")
    if version not in KNOWN_SCHEMA_VERSIONS:
        found = "no schemaVersion" if version is None else f"schemaVersion {version!r:.40}"
        raise TraceFileError(
            f"{path}: unknown profiler version ({found}); slotune reads Kineto traces with "
            f"schemaVersion {', '.join(map(str, KNOWN_SCHEMA_VERSIONS))} (torch.profiler exports)"
        )
    if num_gpu_events == 0:
        raise TraceFileError(
            f"{path}: no GPU events (kernel, gpu_memcpy, gpu_memset): a CPU-only profile; "
            "record with torch.profiler activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
        )
    if num_correlated == 0:
        raise TraceFileError(
            f"{path}: GPU events carry no correlation ids (args.correlation), so launches cannot "
            "be joined to kernels; export the trace with torch.profiler (Kineto) and CUPTI/roctracer"
        )
    dist = meta.get("distributedInfo")
    try:
        info = msgspec.convert(dist if isinstance(dist, dict) else {}, _DistInfo, strict=False)
    except (msgspec.ValidationError, UnicodeEncodeError) as e:  # a lone surrogate key
        raise TraceFileError(
            f"{path}: distributedInfo is not what torch.distributed writes ({e}: rank and "
            "world_size are whole numbers, rank from 0, world_size from 1); re-export the trace"
        ) from e
    return _FileCheck(info.rank, info.world_size)


class _DistInfo(msgspec.Struct, frozen=True):
    """The fields of ``distributedInfo`` that place a file among the ranks of a run."""

    rank: Annotated[int, msgspec.Meta(ge=0, le=_MAX_RANKS)] | None = None
    world_size: Annotated[int, msgspec.Meta(ge=1, le=_MAX_RANKS)] | None = None


def _freeze(
    path: Path,
    rank: int | None,
    device: int,
    b: _Builder,
    names: tuple[str, ...],
    calls: tuple[array[float], array[float], array[int], array[int]],
    cpu_steps: list[Window],
    flops: dict[int, float],
) -> DeviceTrace:
    op_start = np.frombuffer(b.op_start, dtype=np.float64).copy()
    op_end = np.frombuffer(b.op_end, dtype=np.float64).copy()
    op_ext = np.frombuffer(b.op_ext, dtype=np.int64)
    steps_on_gpu = bool(b.gpu_steps)
    windows = b.gpu_steps if steps_on_gpu else cpu_steps
    return DeviceTrace(
        source=str(path),
        rank=rank,
        device=device,
        names=names,
        op_start=op_start,
        op_end=op_end,
        op_kind=np.frombuffer(b.op_kind, dtype=np.int8).copy(),
        op_corr=np.frombuffer(b.op_corr, dtype=np.int64).copy(),
        op_name=np.frombuffer(b.op_name, dtype=np.int32).copy(),
        op_bytes=np.frombuffer(b.op_bytes, dtype=np.float64).copy(),
        op_flops=_op_flops(op_ext, op_end - op_start, flops),
        call_start=np.frombuffer(calls[0], dtype=np.float64).copy(),
        call_end=np.frombuffer(calls[1], dtype=np.float64).copy(),
        call_kind=np.frombuffer(calls[2], dtype=np.int8).copy(),
        call_corr=np.frombuffer(calls[3], dtype=np.int64).copy(),
        windows=tuple(sorted(windows, key=lambda w: w.start_us)),
        steps_on_gpu=steps_on_gpu,
    )


def _op_flops(ext: I64, dur: F64, flops: dict[int, float]) -> F64:
    """Each GPU operation's share of its CPU operator's FLOPs (by duration, when the operator
    launched several kernels); 0 where the trace has no FLOP count."""
    out = np.zeros(ext.size)
    if not flops or ext.size == 0:
        return out
    keys, inverse = np.unique(ext, return_inverse=True)
    group_flops = np.array([flops.get(int(k), 0.0) if k >= 0 else 0.0 for k in keys])
    group_dur = np.bincount(inverse, weights=dur, minlength=keys.size)
    share = np.divide(dur, group_dur[inverse], out=np.zeros(ext.size), where=group_dur[inverse] > 0)
    return np.asarray(group_flops[inverse] * share, dtype=np.float64)


def _check_one_run(path: Path, infos: list[FileInfo]) -> None:
    """A directory must hold the ranks of one run: distinct ranks, one world size, and time
    spans that overlap (two runs recorded at different times do not)."""
    if len(infos) < 2:
        return
    seen: dict[int, Path] = {}
    for info in infos:
        if info.rank is None:  # a file without distributedInfo says nothing about its rank
            continue
        if info.rank in seen:
            raise TraceFileError(
                f"{path}: mixes runs: {seen[info.rank].name} and {info.path.name} are both "
                f"rank {info.rank}; keep one run's per-rank traces in the directory"
            )
        seen[info.rank] = info.path
    sizes = {info.world_size for info in infos if info.world_size is not None}
    if len(sizes) > 1:
        raise TraceFileError(
            f"{path}: mixes runs: world sizes {sorted(sizes)} in one directory; keep one run's "
            "per-rank traces in the directory"
        )
    first = min(infos, key=lambda i: i.end_us)
    last = max(infos, key=lambda i: i.start_us)
    if last.start_us > first.end_us:
        raise TraceFileError(
            f"{path}: mixes runs: {last.path.name} starts after {first.path.name} ends, so they "
            "were not recorded together; keep one run's per-rank traces in the directory"
        )
