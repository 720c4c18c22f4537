"""Diagnosis: where GPU time goes and which engine parameters act on it.

- :func:`diagnose_trace`: a PyTorch profiler (Kineto) trace, file or directory of ranks.
- :func:`diagnose_workload`: a request trace (or a bench run, :func:`bench_run_trace`): its
  traffic, prefix reuse, and the simulator on both sides of the cache/batching settings.
- :func:`diagnose_live`: engine targets from what the agent stored (GPU split, engine
  state), judged by the same rules as a simulated configuration.
- :func:`diagnose_simulated`: a configuration through the simulator, in the same words.
- Findings (:class:`Finding`) carry evidence, a remedy, the engine parameters and a ready
  ``slotune tune`` command; every diagnosis serialises to one documented JSON shape
  (docs/diagnose.md) that is stored in the ``diagnosis`` table.
"""

from slotune.tuner.diagnose._engine_rules import EngineFigures
from slotune.tuner.diagnose._findings import DEFAULT_TUNE_SLOS, Finding, Severity, TuneContext
from slotune.tuner.diagnose._reader import TraceFileError
from slotune.tuner.diagnose._runs import bench_run_trace
from slotune.tuner.diagnose._settings import SimTarget
from slotune.tuner.diagnose._split import TimeSplit
from slotune.tuner.diagnose.html import trace_html
from slotune.tuner.diagnose.live import LiveDiagnosis, diagnose_live
from slotune.tuner.diagnose.simulated import SimDiagnosis, diagnose_simulated
from slotune.tuner.diagnose.trace import TraceDiagnosis, diagnose_trace
from slotune.tuner.diagnose.workload import WorkloadDiagnosis, diagnose_workload

__all__ = [
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
