"""The diagnose package's public surface, pinned (implementation modules stay private)."""

from __future__ import annotations

import slotune.tuner.diagnose as diagnose


def test_public_names() -> None:
    assert sorted(diagnose.__all__) == [
        "DEFAULT_TUNE_SLOS",
        "EngineFigures",
        "Finding",
        "LiveDiagnosis",
        "Severity",
        "SimDiagnosis",
        "SimTarget",
        "TimeSplit",
        "TraceDiagnosis",
        "TraceFileError",
        "TuneContext",
        "WorkloadDiagnosis",
        "bench_run_trace",
        "diagnose_live",
        "diagnose_simulated",
        "diagnose_trace",
        "diagnose_workload",
        "trace_html",
    ]
    for name in diagnose.__all__:
        if name.isupper():  # a constant carries no module of its own
            continue
        assert getattr(diagnose, name).__module__.startswith("slotune.tuner.diagnose")
