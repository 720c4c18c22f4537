"""Diagnosis: where GPU time goes and which engine parameters act on it.

- :func:`diagnose_trace`: a PyTorch profiler (Kineto) trace, file or directory of ranks.
- Findings (:class:`Finding`) carry evidence, a remedy, the engine parameters and a ready
  ``slotune tune`` command; every diagnosis serialises to one documented JSON shape
  (docs/diagnose.md) that is stored in the ``diagnosis`` table.
"""

from slotune.tuner.diagnose._findings import Finding, Severity, TuneContext
from slotune.tuner.diagnose._reader import TraceFileError
from slotune.tuner.diagnose.html import trace_html
from slotune.tuner.diagnose.trace import TraceDiagnosis, diagnose_trace

__all__ = [
    "Finding",
    "Severity",
    "TraceDiagnosis",
    "TraceFileError",
    "TuneContext",
    "diagnose_trace",
    "trace_html",
]
