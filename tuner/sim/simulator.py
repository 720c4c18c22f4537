"""Offline simulation: replay a trace through an engine core as fast as the CPU allows.

Time advances by the cost model's step times; a request joins the first step that starts
at or after its arrival. In a closed loop (``concurrency``) the trace's timestamps are
ignored: ``concurrency`` requests start at once and each finished request is replaced by the
next at the end of the step that finished it, as ``slotune bench --concurrency``, ``vllm bench
serve --max-concurrency`` and AIPerf keep a fixed number in flight. Runs of identical pure-decode steps between events (the next
arrival, a request about to finish, a block shortage) are applied at once
(``EngineCore.decode_run``), which keeps a whole day-long trace within seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import chain
from pathlib import Path

from slotune.collector.errors import ConfigError
from slotune.collector.records import RequestRecord
from slotune.collector.run_figures import LoadFigures, SimEngineFigures, StepBreakdown
from slotune.collector.slo import SLO
from slotune.collector.summary import summarize
from slotune.collector.workload import Trace, resolve_workload, retime
from slotune.collector.workload.synthetic import Column, parse_length_spec, synthetic_trace
from slotune.tuner.sim.config import EngineConfig
from slotune.tuner.sim.cost import StepTime
from slotune.tuner.sim.engine import DecodeRun, EngineCore, StepResult
from slotune.tuner.sim.request import RequestRejected, SimRequest
from slotune.tuner.sim.results import EngineSeries, RequestTiming, SimResult

ProgressCallback = Callable[[int, int], None]
_MAX_SERIES_POINTS = 2000
_DEFAULT_SYNTHETIC_REQUESTS = 1000
_PROGRESS_EVERY_STEPS = 4096
# Pricing a step's split costs more than its total: split every Nth step and run and scale
# the sampled split to the total busy time (the mix of steps is stable over a trace).
_SPLIT_SAMPLE_EVERY = 8


def load_workload(
    *,
    workload: str | None = None,
    trace_file: str | Path | None = None,
    input_len: str | None = None,
    output_len: str | None = None,
    num_requests: int | None = None,
    rate: float | None = None,
    time_scale: float | None = None,
    seed: int = 0,
) -> Trace:
    """The trace ``slotune sim`` replays: a bundled trace, a trace file, or synthetic lengths.

    Args:
        workload: bundled trace name (``azure-conv`` …).
        trace_file: trace file (canonical JSONL, Azure CSV, Mooncake JSONL).
        input_len: synthetic prompt lengths (``512``, ``uniform:128,1024`` …), with
            ``output_len``; arrivals all at once unless ``rate`` is given.
        output_len: synthetic output lengths.
        num_requests: keep the first N requests (synthetic: how many; default 1000).
        rate: replace arrivals by a Poisson process of this many requests/s.
        time_scale: multiply the trace's gaps.
        seed: seed of synthetic lengths and Poisson arrivals.

    Raises:
        ConfigError: no source or more than one, or a bad spec.
    """
    if (input_len is None) != (output_len is None):
        raise ConfigError("give both --input-len and --output-len for a synthetic workload")
    sources = sum(x is not None for x in (workload, trace_file, input_len))
    if sources != 1:
        raise ConfigError(
            "give exactly one workload: --workload NAME, --trace FILE, or "
            "--input-len and --output-len"
        )
    if input_len is not None and output_len is not None:
        trace = synthetic_trace(
            parse_length_spec(input_len),
            parse_length_spec(output_len, column=Column.OUTPUT, field_name="--output-len"),
            num_requests or _DEFAULT_SYNTHETIC_REQUESTS,
            seed=seed,
        )
    else:
        trace = resolve_workload(workload, trace_file)
    return retime(trace, rate=rate, time_scale=time_scale, num_requests=num_requests, seed=seed)


def trace_requests(trace: Trace, *, max_tokens: int | None = None) -> list[SimRequest]:
    """The trace's requests as engine requests, ids ``"0"``, ``"1"``, … in trace order.

    Args:
        trace: arrivals and lengths.
        max_tokens: every request's ``max_tokens``, the trace's output lengths becoming
            where the model emits EOS; None: the trace's output lengths are the
            ``max_tokens`` and requests run to them.
    """
    return [
        SimRequest(
            request_id=str(i),
            arrival_s=r.timestamp_s,
            prompt_tokens=r.input_tokens,
            max_tokens=r.output_tokens if max_tokens is None else max_tokens,
            hash_ids=r.hash_ids,
            hash_block_size=r.block_size if r.hash_ids else None,
            eos_after_tokens=None if max_tokens is None else r.output_tokens,
        )
        for i, r in enumerate(trace.requests)
    ]


def simulate(
    config: EngineConfig,
    trace: Trace,
    *,
    slos: Sequence[SLO] = (),
    seed: int = 0,
    progress: ProgressCallback | None = None,
    max_tokens: int | None = None,
    concurrency: int | None = None,
) -> SimResult:
    """Serve every request of ``trace`` on a simulated engine.

    Args:
        config: the engine configuration (defaults resolved like the engine).
        trace: arrivals and lengths; each request generates exactly its output tokens.
        slos: SLOs for goodput and attainment in the summary.
        seed: recorded in the result's config; the simulation itself is deterministic, so
            randomness lives in the trace (see ``collector.workload.retime``).
        progress: called now and then with (finished requests, total requests).
        max_tokens: every request's ``max_tokens``; the trace's output lengths are then
            where the model emits EOS (see :func:`trace_requests`).
        concurrency: keep this many requests in flight (closed loop) instead of the
            trace's arrivals; the summary then covers the steady state only (see
            :func:`steady_state`).

    Returns:
        Records, summary, timings, time series, step split and the resolved config.

    Raises:
        ConfigError / EngineConfigError: the configuration is invalid, as the engine says;
            a closed loop with too few requests for a steady state.
    """
    return replay(
        EngineCore.create(config),
        trace,
        slos=slos,
        seed=seed,
        progress=progress,
        max_tokens=max_tokens,
        concurrency=concurrency,
    )


def replay(
    core: EngineCore,
    trace: Trace,
    *,
    slos: Sequence[SLO] = (),
    seed: int = 0,
    progress: ProgressCallback | None = None,
    max_tokens: int | None = None,
    concurrency: int | None = None,
) -> SimResult:
    """Serve every request of ``trace`` on an engine core built by the caller.

    Same as :func:`simulate` for a core from ``EngineCore.create``; lets a caller bring a
    core with its own cost model or KV capacity.
    """
    requests = trace_requests(trace, max_tokens=max_tokens)
    window = None if concurrency is None else steady_state(len(requests), concurrency)
    timeline = _Timeline(
        requests, sample_interval_s=max(0.5, trace.duration_s / _MAX_SERIES_POINTS)
    )
    _run(core, requests, timeline, progress, concurrency)
    records = timeline.records()
    load = None
    if window is not None:
        records = records[window]
        load = _closed_loop_load(len(requests), window)
    stats = core.stats
    breakdown = timeline.breakdown()
    kv_log = core.kv_log_lines()
    mean_tokens = sum(r.prompt_tokens + r.max_tokens for r in requests) / max(len(requests), 1)
    kv_warning = core.kv_room_warning(mean_tokens, "this workload's mean prompt + output")
    if kv_warning:
        kv_log.append(f"WARNING {kv_warning}")
    engine = SimEngineFigures(
        prefix_hit_rate=stats.prefix_hits / stats.prefix_queries if stats.prefix_queries else 0.0,
        preemptions=stats.preemptions,
        kv_blocks=stats.kv_blocks,
        kv_tokens=stats.kv_tokens,
        step_time_breakdown=breakdown,
        kv_warning=kv_warning or None,
    )
    summary = summarize(records, slos, engine=engine, load=load)
    params = core.config.to_dict() | {"seed": seed}
    return SimResult(
        records=records,
        summary=summary,
        timings=timeline.timings(),
        series=timeline.series(),
        breakdown=breakdown,
        config=params,
        kv_log=kv_log,
    )


def replay_timings(
    core: EngineCore, trace: Trace, *, concurrency: int | None = None
) -> list[RequestTiming]:
    """Per-request timings of ``trace`` served on ``core``, without records or summary.

    The cheap form of :func:`replay` for loops that run the simulator many times
    (calibration): same simulation, only arrival, first-token and finish times kept; in a
    closed loop, only the steady state's.
    """
    requests = trace_requests(trace)
    window = None if concurrency is None else steady_state(len(requests), concurrency)
    timeline = _Timeline(requests, sample_interval_s=float("inf"))
    _run(core, requests, timeline, None, concurrency)
    timings = timeline.timings()
    return timings if window is None else timings[window]


def steady_state(num_requests: int, concurrency: int) -> slice:
    """The requests a closed loop measures: all but the first and the last ``concurrency``.

    The first ``concurrency`` start together (a burst no steady state has), and the last
    ``concurrency`` finish while fewer and fewer others run; the rest see a full loop, as
    AIPerf's warm-up and cool-down leave them.

    Raises:
        ConfigError: fewer than ``3 * concurrency`` requests, which leaves too few measured.
    """
    if concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1, got {concurrency}")
    if num_requests < 3 * concurrency:
        raise ConfigError(
            f"a closed loop at --concurrency {concurrency} needs at least "
            f"{3 * concurrency} requests (the first and last {concurrency} are warm-up and "
            f"cool-down), got {num_requests}: raise --num-requests"
        )
    return slice(concurrency, num_requests - concurrency)


def _closed_loop_load(num_requests: int, window: slice) -> LoadFigures:
    return LoadFigures(
        target_rate=None,
        offered_rate=None,
        achieved_rate=None,
        send_lag_ms=None,
        num_warmup=window.start,
        num_cooldown=num_requests - window.stop,
        num_cooldown_cancelled=0,
        num_sent=num_requests,
        usage_missing=0,
        client_token_mismatches=0,
    )


def _run(
    core: EngineCore,
    requests: list[SimRequest],
    timeline: _Timeline,
    progress: ProgressCallback | None,
    concurrency: int | None = None,
) -> None:
    now = 0.0
    nxt = 0
    total = len(requests)
    events = 0
    # closed loop: requests that may start now (a finished one frees its place at once)
    num_free = total if concurrency is None else concurrency
    while True:
        # arrivals
        while nxt < total and (
            requests[nxt].arrival_s <= now if concurrency is None else num_free > 0
        ):
            if concurrency is not None:
                requests[nxt] = replace(requests[nxt], arrival_s=now)
                num_free -= 1
            try:
                core.add_request(requests[nxt])
            except RequestRejected as e:
                timeline.fail(nxt, "http_4xx", str(e))
                num_free += 1
            nxt += 1
        next_arrival = (
            requests[nxt].arrival_s if nxt < total and concurrency is None else float("inf")
        )
        if not core.has_unfinished():
            if nxt >= total:
                break
            now = next_arrival
            continue
        # decode run, else one step
        with_split = events % _SPLIT_SAMPLE_EVERY == 0
        run = core.decode_run(1 << 30, next_arrival - now, with_split=with_split)
        if run is not None:
            now = timeline.add_run(run, now)
            num_free += len(run.finished)
        else:
            result = core.step(with_split=with_split)
            if result is None:
                if nxt >= total or next_arrival == float("inf"):
                    break
                now = next_arrival
                continue
            now = timeline.add_step(result, now)
            num_free += len(result.finished)
        timeline.maybe_sample(core, now)
        events += 1
        if progress is not None and events % _PROGRESS_EVERY_STEPS == 0:
            progress(timeline.num_finished, total)
    timeline.stall_remaining()
    if progress is not None:
        progress(timeline.num_finished, total)


class _Timeline:
    """Per-request token times and engine samples, recorded compactly as steps go by.

    Token times are kept as runs of consecutive step indices per request (a request that
    decodes for 200 steps costs one pair), resolved against the step end times at the end.
    """

    def __init__(self, requests: list[SimRequest], *, sample_interval_s: float) -> None:
        self.requests = requests
        self.index = {r.request_id: i for i, r in enumerate(requests)}
        n = len(requests)
        self.step_end_s: list[float] = []
        self.segments: list[list[int]] = [[] for _ in range(n)]
        self.scheduled_s: list[float | None] = [None] * n
        self.num_preempted = [0] * n
        self.errors: dict[int, tuple[str, str]] = {}
        self.num_finished = 0
        self.split = [0.0, 0.0, 0.0, 0.0]
        self.busy_s = 0.0
        self.sampled_s = 0.0
        self.sample_interval_s = sample_interval_s
        self.next_sample_s = 0.0
        self.samples: list[tuple[float, int, int, float, int, int, int]] = []

    # recording
    def add_step(self, result: StepResult, start_s: float) -> float:
        j = len(self.step_end_s)
        end_s = start_s + result.duration_s
        self.step_end_s.append(end_s)
        index, segments = self.index, self.segments
        for rid, _ in result.tokens:
            seg = segments[index[rid]]
            if seg and seg[-1] == j:
                seg[-1] = j + 1
            else:
                seg += (j, j + 1)
        for rid in result.started:
            self.scheduled_s[index[rid]] = start_s
        for rid in result.preempted:
            self.num_preempted[index[rid]] += 1
        self.num_finished += len(result.finished)
        if result.time is not None:
            self._add_split(result.time, 1.0)
        self.busy_s += result.duration_s
        return end_s

    def add_run(self, run: DecodeRun, start_s: float) -> float:
        j0 = len(self.step_end_s)
        t = start_s
        ends = self.step_end_s
        for d in run.durations_s:
            t += d
            ends.append(t)
        k = len(run.durations_s)
        index, segments = self.index, self.segments
        for rid in run.request_ids:
            seg = segments[index[rid]]
            if seg and seg[-1] == j0:
                seg[-1] = j0 + k
            else:
                seg += (j0, j0 + k)
        self.num_finished += len(run.finished)
        if run.first_time is not None:
            self._add_split(run.first_time, (t - start_s) / run.first_time.total_s)
        self.busy_s += t - start_s
        return t

    def _add_split(self, time: StepTime, weight: float) -> None:
        s = self.split
        s[0] += time.compute_s * weight
        s[1] += time.memory_s * weight
        s[2] += time.communication_s * weight
        s[3] += time.overhead_s * weight
        self.sampled_s += time.total_s * weight

    def fail(self, i: int, kind: str, message: str) -> None:
        """Record a request that got no answer: ``http_4xx`` (refused) or ``timeout``."""
        self.errors[i] = (kind, message)

    def stall_remaining(self) -> None:
        """Mark requests the engine never finished (it could not schedule them)."""
        for i, r in enumerate(self.requests):
            if i in self.errors:
                continue
            seg = self.segments[i]
            produced = sum(seg[k + 1] - seg[k] for k in range(0, len(seg), 2))
            if produced < r.num_output_tokens:
                self.fail(
                    i,
                    "timeout",
                    "the simulated engine could not schedule this request "
                    f"(produced {produced} of {r.num_output_tokens} tokens)",
                )

    def maybe_sample(self, core: EngineCore, now_s: float) -> None:
        if now_s < self.next_sample_s:
            return
        s = core.stats
        self.samples.append(
            (
                now_s,
                s.requests_running,
                s.requests_waiting,
                s.kv_usage,
                s.prefix_queries,
                s.prefix_hits,
                s.preemptions,
            )
        )
        self.next_sample_s = now_s + self.sample_interval_s

    # results
    def records(self) -> list[RequestRecord]:
        ends = self.step_end_s
        out: list[RequestRecord] = []
        for i, r in enumerate(self.requests):
            error = self.errors.get(i)
            if error is not None:
                kind, detail = error
                out.append(
                    RequestRecord(
                        request_id=r.request_id,
                        send_s=r.arrival_s,
                        first_token_s=None,
                        end_s=None,
                        input_tokens=r.prompt_tokens,
                        output_tokens=None,
                        error=kind,
                        error_detail=detail,
                        http_status=400 if kind == "http_4xx" else None,
                        scheduled_s=r.arrival_s,
                    )
                )
                continue
            seg = self.segments[i]
            if len(seg) == 2:
                times = tuple(ends[seg[0] : seg[1]])
            else:
                times = tuple(
                    chain.from_iterable(ends[seg[k] : seg[k + 1]] for k in range(0, len(seg), 2))
                )
            out.append(
                RequestRecord(
                    request_id=r.request_id,
                    send_s=r.arrival_s,
                    first_token_s=times[0],
                    end_s=times[-1],
                    chunk_times_s=times,
                    chunk_tokens=(1,) * len(times),
                    input_tokens=r.prompt_tokens,
                    output_tokens=len(times),
                    scheduled_s=r.arrival_s,
                )
            )
        return out

    def timings(self) -> list[RequestTiming]:
        ends = self.step_end_s
        out: list[RequestTiming] = []
        for i, r in enumerate(self.requests):
            seg = self.segments[i]
            done = i not in self.errors and bool(seg)
            out.append(
                RequestTiming(
                    request_id=r.request_id,
                    arrival_s=r.arrival_s,
                    scheduled_s=self.scheduled_s[i],
                    first_token_s=ends[seg[0]] if seg else None,
                    finished_s=ends[seg[-1] - 1] if done else None,
                    preemptions=self.num_preempted[i],
                    finish_reason=r.finish_reason if done else None,
                )
            )
        return out

    def series(self) -> EngineSeries:
        columns = list(zip(*self.samples, strict=True)) if self.samples else [()] * 7
        return EngineSeries(*(tuple(c) for c in columns))

    def breakdown(self) -> StepBreakdown:
        scale = self.busy_s / self.sampled_s if self.sampled_s else 0.0
        c, m, comm, o = (x * scale for x in self.split)
        return StepBreakdown(
            num_steps=len(self.step_end_s),
            busy_s=self.busy_s,
            compute_s=c,
            memory_s=m,
            communication_s=comm,
            overhead_s=o,
        )
