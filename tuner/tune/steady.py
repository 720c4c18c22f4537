"""Whether a run reached steady state: the engine kept up with the offered load.

A capacity measured on a trace too short for the queue to build up is wrong: at a rate the
engine cannot sustain, the first few hundred requests can still meet the SLOs while the queue
(and the KV cache) keeps growing. A run is steady when the number of requests in the engine
(sent, not finished) at the last arrival is not much larger than at the middle arrival: the
growth between the two, as a share of the requests sent in between, is about (offered -
served) / offered, and stays near 0 (within Poisson noise) at a sustainable rate.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence

from slotune.collector.records import RequestRecord
from slotune.collector.summary import Summary

# Above this share the engine served at least a quarter less than was offered in the second
# half of the arrivals; Poisson noise on 150 requests is about 0.08.
MAX_QUEUE_GROWTH = 0.25


def queue_growth(records: Sequence[RequestRecord]) -> float:
    """Growth of the requests in the engine from the middle to the last arrival, per request
    sent in between (0 for fewer than 4 requests)."""
    sends = sorted(r.send_s for r in records)
    if len(sends) < 4:
        return 0.0
    ends = sorted(r.end_s if r.end_s is not None else math.inf for r in records)
    mid, last = sends[len(sends) // 2], sends[-1]

    def in_engine(t: float) -> int:
        return bisect.bisect_right(sends, t) - bisect.bisect_right(ends, t)

    sent_between = bisect.bisect_right(sends, last) - bisect.bisect_right(sends, mid)
    return (in_engine(last) - in_engine(mid)) / max(1, sent_between)


def with_queue_growth(summary: Summary, records: Sequence[RequestRecord]) -> Summary:
    """``summary`` with the run's queue growth."""
    return dataclasses.replace(summary, queue_growth=queue_growth(records))


def is_steady(summary: Summary) -> bool:
    """Whether the run kept up with its load (a run without the figure counts as steady)."""
    return (summary.queue_growth or 0.0) <= MAX_QUEUE_GROWTH
