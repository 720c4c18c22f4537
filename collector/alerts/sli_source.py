"""The SLI-reading contract and the choice of its implementation.

:class:`SliSource` is what the evaluator, SLO status and history read: the store's
:class:`~collector.alerts.sli.SliReader` or a query API's
:class:`~collector.alerts.sli_prom.PromSliReader`, both answering the same questions with the
same bucket-bound rule, so either gives the same good / total and burn rates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from slotune.collector.alerts.sli import BoundaryNote, SliCounts, SliReader
from slotune.collector.alerts.sli_prom import PromSliReader
from slotune.collector.metrics import PromClient
from slotune.collector.slo import SLO
from slotune.collector.store import Store


class SliSource(Protocol):
    """SLI counts at one evaluation time ``at_ts``."""

    @property
    def at_ts(self) -> float: ...

    def prefetch(self, needs: Iterable[tuple[SLO, Sequence[float]]]) -> None:
        """Read ahead what many SLOs need (an optimisation; may do nothing)."""

    def counts(self, slo: SLO, windows: Sequence[float]) -> SliCounts:
        """Good / total per window ending at ``at_ts``, and the bucket note."""

    def newest_ts(self, slo: SLO) -> float | None:
        """The newest sample time of the SLO's series (None: none)."""

    def bounds(self, slo: SLO) -> list[float]:
        """The finite bucket bounds of the SLO's histogram."""

    def note(self, slo: SLO) -> BoundaryNote | None:
        """What the threshold is to the bounds, when it is not one."""


def sli_reader(store: Store, at_ts: float, metrics: PromClient | None = None) -> SliSource:
    """The reader of ``metrics`` (a query API) when given, else of the store."""
    if metrics is not None:
        return PromSliReader(metrics, at_ts)
    return SliReader(store, at_ts)
