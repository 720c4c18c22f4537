"""A simulation as a command line asks for it: engine flags, a workload named by its flags, SLOs.

``slotune sim`` is options, :func:`simulate_flags`, then rendering; ``plan`` and ``fleet`` read
their workload through the same :class:`WorkloadChoice`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slotune.collector.slo import parse_slos
from slotune.collector.workload import Trace
from slotune.tuner.sim.flags import parse_engine_flags
from slotune.tuner.sim.results import SimResult
from slotune.tuner.sim.simulator import ProgressCallback, load_workload, simulate


@dataclass(frozen=True, slots=True)
class WorkloadChoice:
    """The requests to replay, as the shared workload flags name them.

    Exactly one source: a bundled trace (``workload``), a trace file (``trace_file``), or
    synthetic lengths (``input_len`` with ``output_len``); see docs/options.md.
    """

    workload: str | None = None
    trace_file: Path | None = None
    input_len: str | None = None
    output_len: str | None = None
    rate: float | None = None
    time_scale: float | None = None
    num_requests: int | None = None
    seed: int = 0
    concurrency: int | None = None

    @property
    def label(self) -> str | None:
        """The workload as a stored result names it: the bundled trace or the file."""
        return self.workload or (str(self.trace_file) if self.trace_file else None)

    def load(self) -> Trace:
        """The trace.

        Raises:
            ConfigError: no source or more than one, or a bad length spec or file.
        """
        return load_workload(
            workload=self.workload,
            trace_file=self.trace_file,
            input_len=self.input_len,
            output_len=self.output_len,
            num_requests=self.num_requests,
            rate=self.rate,
            time_scale=self.time_scale,
            seed=self.seed,
        )


def simulate_flags(
    engine_flags: Sequence[str],
    *,
    engine: str,
    model: str | None,
    gpu: str | None,
    workload: WorkloadChoice,
    slos: Sequence[str] = (),
    max_tokens: int | None = None,
    requests_out: Path | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[Trace, SimResult]:
    """Simulate the engine the flags configure serving the workload.

    Args:
        engine_flags: the engine's own flags (``--max-num-seqs 128`` …).
        engine: ``vllm`` or ``trtllm``.
        model: catalog model id.
        gpu: catalog GPU id.
        workload: the requests.
        slos: SLOs in shorthand, for goodput and attainment.
        max_tokens: every request's max_tokens (see ``simulate``).
        requests_out: also write every simulated request here, in the measured-requests
            format of ``slotune sim calibrate --observed``.
        progress: called with (done, total) requests.

    Returns:
        The trace replayed and the result.

    Raises:
        ConfigError: a bad flag, workload or SLO, naming it.
    """
    from slotune.collector.observed import write_observed

    config = parse_engine_flags(engine_flags, engine=engine, model=model, gpu=gpu)
    trace = workload.load()
    result = simulate(
        config,
        trace,
        slos=parse_slos(list(slos)),
        seed=workload.seed,
        progress=progress,
        max_tokens=max_tokens,
        concurrency=workload.concurrency,
    )
    if requests_out is not None:
        write_observed(result.records, requests_out, trace=trace.requests)
    return trace, result
