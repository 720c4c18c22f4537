"""``diagnose workload``: what the traffic looks like and which engine settings suit it.

The result's JSON shape (``WorkloadDiagnosis.to_dict``, docs/diagnose.md)::

    {"kind": "workload", "source": ..., "traffic": {...}, "prefix": {...} | null,
     "simulated": {"engine", "model", "gpu", "num_requests", "runs": [...]},
     "findings": [...]}

The recommendations rest on two kinds of evidence: the trace itself (prefix reuse, lengths,
burstiness) and the simulator run on both sides of each setting over the first requests of
the trace (``num_sim_requests``), so each recommendation carries its expected effect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slotune.collector.workload import MOONCAKE_BLOCK_SIZE, Trace, retime
from slotune.tuner.diagnose._findings import Finding, Severity, TuneContext, finding
from slotune.tuner.diagnose._prefix import PrefixReuse, prefix_reuse
from slotune.tuner.diagnose._settings import SettingRun, SimTarget, run_setting
from slotune.tuner.diagnose._traffic import Traffic, traffic
from slotune.tuner.engines.base import Knob
from slotune.tuner.engines.registry import adapter_for

PREFIX_REUSE_MIN = 0.10  # reused prompt-token share that makes a prefix cache pay
CHUNKING_GAIN = 0.10  # relative ITL p99 gain that makes chunked prefill worth it
LONG_SHORT_RATIO = 8.0  # input p99 / p50 above which lengths are two populations
LONG_TOKEN_SHARE = 0.40  # share of prompt tokens in the longest 10 % of requests
BURSTY_CV = 2.0
BURSTY_PEAK_TO_MEAN = 3.0
SMALL_BUDGET = 2048
OVERLOAD_TTFT_MS = 5000.0  # simulated TTFT p50 at which one replica cannot keep up


@dataclass(frozen=True, slots=True)
class WorkloadDiagnosis:
    """The analysis of one request trace."""

    source: str
    traffic: Traffic
    prefix: PrefixReuse | None
    target: SimTarget
    num_sim_requests: int
    runs: tuple[SettingRun, ...]
    findings: tuple[Finding, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "workload",
            "source": self.source,
            "traffic": self.traffic.to_dict(),
            "prefix": self.prefix.to_dict() if self.prefix else None,
            "simulated": {
                "engine": self.target.engine,
                "model": self.target.model,
                "gpu": self.target.gpu,
                "num_requests": self.num_sim_requests,
                "runs": [r.to_dict() for r in self.runs],
            },
            "findings": [f.to_dict() for f in self.findings],
        }


def diagnose_workload(
    trace: Trace,
    *,
    target: SimTarget | None = None,
    num_sim_requests: int = 1000,
    time_scale: float | None = None,
    context: TuneContext | None = None,
) -> WorkloadDiagnosis:
    """Describe a trace and judge prefix caching, chunked prefill, the token budget and a
    long/short split for it.

    Args:
        trace: the requests (a bundled workload, a trace file or a bench run's records).
        target: engine, model and GPU the simulator stands in for.
        num_sim_requests: how many of the first requests the simulator replays per setting.
        time_scale: multiply the trace's gaps for the simulated runs (2 = half the rate), to
            compare settings at a rate one replica can serve.
        context: ``slotune tune`` flags for the findings' tune commands.
    """
    target = target or SimTarget()
    adapter = adapter_for(target.engine)
    caching = adapter.knob_names[Knob.PREFIX_CACHE]
    budget = adapter.knob_names[Knob.TOKEN_BUDGET]
    head = retime(trace, num_requests=num_sim_requests, time_scale=time_scale)
    settings: tuple[dict[str, Any], ...] = (
        {},
        adapter.knob_params(Knob.PREFIX_CACHE, False),
        adapter.knob_params(Knob.CHUNKED_PREFILL, False),
        adapter.knob_params(Knob.TOKEN_BUDGET, SMALL_BUDGET),
    )
    runs = tuple(run_setting(head, target, _label(params), params) for params in settings)
    flow = traffic(trace.requests)
    prefix = prefix_reuse(trace.requests, MOONCAKE_BLOCK_SIZE, capacity_tokens=runs[0].kv_tokens)
    findings = (
        [] if (runs[0].ttft_p50_ms or 0) < OVERLOAD_TTFT_MS else [_overload_finding(runs[0], head)]
    )
    findings += [
        _prefix_finding(prefix, runs[0], runs[1], caching, context),
        _chunking_finding(runs[0], runs[2], runs[3], budget, context),
        _split_finding(flow),
    ]
    if (flow.interarrival_cv or 0) >= BURSTY_CV or (
        flow.peak_to_mean_1m or 0
    ) >= BURSTY_PEAK_TO_MEAN:
        findings.append(_bursty_finding(flow, context))
    return WorkloadDiagnosis(
        source=trace.source or trace.name,
        traffic=flow,
        prefix=prefix,
        target=target,
        num_sim_requests=len(head),
        runs=runs,
        findings=tuple(findings),
    )


def _label(params: dict[str, Any]) -> str:
    """A setting's name: its parameters as ``--param`` writes them, or ``defaults``."""
    if not params:
        return "defaults"
    return ",".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items()
    )


def _overload_finding(default: SettingRun, head: Trace) -> Finding:
    return finding(
        "replica-overloaded",
        Severity.WARNING,
        f"one simulated replica cannot keep up with this traffic: TTFT p50 "
        f"{(default.ttft_p50_ms or 0.0) / 1000:,.0f} s at {head.mean_rate:.2f} req/s",
        {
            "sim_ttft_p50_ms": default.ttft_p50_ms,
            "sim_rate": head.mean_rate,
            "sim_preemptions": default.preemptions,
        },
        "The trace's rate needs several replicas (plan them with slotune fleet plan). The "
        "setting comparisons below are made in overload; rerun with --time-scale K (K times "
        "the gaps) to compare them at a rate one replica serves.",
    )


def _change(new: float | None, old: float | None) -> float | None:
    """Relative change from ``old`` to ``new`` (negative: lower)."""
    if new is None or old is None or old == 0:
        return None
    return (new - old) / old


def _prefix_finding(
    prefix: PrefixReuse | None,
    on: SettingRun,
    off: SettingRun,
    caching: str,
    context: TuneContext | None,
) -> Finding:
    evidence: dict[str, Any] = {
        "sim_prefix_hit_rate": on.prefix_hit_rate,
        "sim_ttft_p50_ms_on": on.ttft_p50_ms,
        "sim_ttft_p50_ms_off": off.ttft_p50_ms,
        "sim_prefill_tokens_saved": off.prefill_tokens - on.prefill_tokens,
    }
    if prefix is not None:
        evidence |= {
            "reused_token_share": prefix.reused_token_share,
            "multi_turn_share": prefix.multi_turn_share,
            "system_prompt_share": prefix.system_prompt_share,
            "working_set_tokens": prefix.working_set_tokens,
            "replica_kv_tokens": on.kv_tokens,
            "reused_block_share_at_capacity": prefix.reused_block_share_at_capacity,
        }
    if prefix is not None and prefix.reused_token_share >= PREFIX_REUSE_MIN:
        ttft = _change(on.ttft_p50_ms, off.ttft_p50_ms)
        fits = prefix.working_set_tokens <= on.kv_tokens
        return finding(
            "prefix-caching-helps",
            Severity.INFO,
            f"{prefix.reused_token_share:.0%} of prompt tokens repeat an earlier prefix: keep "
            f"{caching} on"
            + (f" (simulated TTFT p50 {ttft:+.0%} with it)" if ttft is not None else ""),
            evidence,
            f"Keep {caching} on: about {prefix.reused_token_share:.0%} of prefill is saved "
            f"at unbounded capacity. The reused working set needs "
            f"{prefix.working_set_tokens:,} KV tokens; one replica holds {on.kv_tokens:,}"
            + (
                ", so it fits."
                if fits
                else ", so give the cache more memory (gpu_memory_utilization) or route "
                "requests of one conversation or prompt to the same replica."
            ),
            (caching, "gpu_memory_utilization"),
            context,
        )
    why = (
        "the trace carries no prefix hashes and, replayed, its prompts share no prefix"
        if prefix is None
        else f"only {prefix.reused_token_share:.0%} of prompt tokens repeat an earlier prefix"
    )
    return finding(
        "prefix-caching-wastes-memory",
        Severity.INFO,
        f"prefix caching would not pay: {why}",
        evidence,
        f"Caching cannot save prefill here and would only hold memory: {caching}=false "
        "frees its bookkeeping; give the memory to running requests (max_num_seqs).",
        (caching, "max_num_seqs"),
        context,
    )


def _chunking_finding(
    default: SettingRun,
    unchunked: SettingRun,
    small_budget: SettingRun,
    budget: str,
    context: TuneContext | None,
) -> Finding:
    # Relative change chunked vs unchunked (negative: chunking lowers it).
    itl = _change(default.itl_p99_ms, unchunked.itl_p99_ms)
    ttft = _change(default.ttft_p50_ms, unchunked.ttft_p50_ms)
    evidence = {
        "sim_itl_p99_ms_chunked": default.itl_p99_ms,
        "sim_itl_p99_ms_unchunked": unchunked.itl_p99_ms,
        "sim_ttft_p50_ms_chunked": default.ttft_p50_ms,
        "sim_ttft_p50_ms_unchunked": unchunked.ttft_p50_ms,
        f"sim_itl_p99_ms_{budget}_{SMALL_BUDGET}": small_budget.itl_p99_ms,
        f"sim_ttft_p50_ms_{budget}_{SMALL_BUDGET}": small_budget.ttft_p50_ms,
    }
    params = ("enable_chunked_prefill", budget, "long_prefill_token_threshold")
    effects = [
        f"{'lowers' if change < 0 else 'raises'} simulated {metric} "
        + (f"{1 + change:.0f}x" if change >= 1 else f"by {abs(change):.0%}")
        for metric, change in (("ITL p99", itl), ("TTFT p50", ttft))
        if change is not None and abs(change) >= CHUNKING_GAIN
    ]
    gains = any(c is not None and c <= -CHUNKING_GAIN for c in (itl, ttft))
    costs = any(c is not None and c >= CHUNKING_GAIN for c in (itl, ttft))
    small = (
        f"a {SMALL_BUDGET}-token budget gives ITL p99 {_ms_text(small_budget.itl_p99_ms)} and "
        f"TTFT p50 {_ms_text(small_budget.ttft_p50_ms)}"
    )
    if gains and costs:
        return finding(
            "chunked-prefill-tradeoff",
            Severity.INFO,
            f"chunked prefill {' and '.join(effects)}: a trade-off",
            evidence,
            f"Choose by the SLO you miss: chunking (enable_chunked_prefill) and a smaller "
            f"budget ({budget}) favour one side; {small}. Tune both against your SLOs.",
            params,
            context,
        )
    if gains:
        return finding(
            "chunked-prefill-helps",
            Severity.INFO,
            f"long prompts hold up other requests: chunked prefill {' and '.join(effects)}",
            evidence,
            f"Keep enable_chunked_prefill on; a smaller token budget ({budget}) lowers ITL "
            f"further at some TTFT cost: {small}.",
            params,
            context,
        )
    if costs:
        return finding(
            "chunked-prefill-costs",
            Severity.INFO,
            f"chunked prefill {' and '.join(effects)} with no gain: prompts are short or the "
            "load is low",
            evidence,
            "Prefill in one piece (enable_chunked_prefill=false) or raise the token budget.",
            params,
            context,
        )
    return finding(
        "chunked-prefill-neutral",
        Severity.OK,
        "chunked prefill changes neither ITL p99 nor TTFT p50 by 10 % on this traffic",
        evidence,
        "Leave the engine default; tune the token budget against your SLOs if needed.",
    )


def _ms_text(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:,.0f} ms"


def _split_finding(flow: Traffic) -> Finding:
    ratio = flow.input_tokens.p99 / flow.input_tokens.p50 if flow.input_tokens.p50 else 0.0
    evidence = {
        "input_p50": flow.input_tokens.p50,
        "input_p90": flow.input_tokens.p90,
        "input_p99": flow.input_tokens.p99,
        "input_p99_over_p50": ratio,
        "long_prefill_token_share": flow.long_prefill_token_share,
    }
    if ratio >= LONG_SHORT_RATIO and flow.long_prefill_token_share >= LONG_TOKEN_SHARE:
        return finding(
            "long-short-split-warranted",
            Severity.INFO,
            f"prompt lengths form two populations (p99 {ratio:.0f}x p50; the longest 10 % hold "
            f"{flow.long_prefill_token_share:.0%} of prompt tokens)",
            evidence,
            f"Serve prompts above ~{flow.input_tokens.p90:,.0f} tokens on their own pool so "
            "they stop inflating the short requests' latency (see slotune fleet plan).",
        )
    return finding(
        "long-short-split-not-needed",
        Severity.OK,
        f"prompt lengths are one population (p99 {ratio:.1f}x p50): one pool serves them",
        evidence,
        "No split: a single pool with chunked prefill handles this spread.",
    )


def _bursty_finding(flow: Traffic, context: TuneContext | None) -> Finding:
    return finding(
        "bursty-arrivals",
        Severity.INFO,
        f"arrivals are bursty (inter-arrival CV {flow.interarrival_cv or 0:.1f}, busiest "
        f"minute {flow.peak_to_mean_1m or 0:.1f}x the mean)",
        {
            "interarrival_cv": flow.interarrival_cv,
            "peak_to_mean_1m": flow.peak_to_mean_1m,
            "peak_to_mean_1h": flow.peak_to_mean_1h,
        },
        "Size for the peaks, not the mean: tune at the peak rate, or autoscale / shed load "
        "on queue depth; a larger max_num_seqs absorbs short bursts if KV allows.",
        ("max_num_seqs",),
        context,
    )
