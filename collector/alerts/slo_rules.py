"""An SLO's alerts as stored alert rules: one ``slo_burn`` rule per severity.

The rule ``chat-ttft:page`` fires when any ``page`` condition of SLO ``chat-ttft`` fires.
The SLO itself, ``interpolate`` and ``alerting`` included, is stored whole in the ``slo``
table; a rule names it and carries only what a rule has of its own (severity, labels, on/off).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from slotune.collector.alerts.policy import burn_windows, error_budget
from slotune.collector.alerts.sli import BoundaryNote, SliReader
from slotune.collector.engine_buckets import engine_bounds
from slotune.collector.slo import SLI, SLO
from slotune.collector.store import (
    AlertRuleInfo,
    Store,
    delete_alert_rules,
    delete_slo,
    list_alert_rules,
    list_slos,
    save_alert_rule,
    save_slos,
)

SLO_KIND = "slo_burn"


def rule_name(slo: SLO, severity: str) -> str:
    return f"{slo.name}:{severity}"


def slo_rules(slo: SLO, *, min_window_s: float = 0.0) -> list[AlertRuleInfo]:
    """The alert rules of an SLO (disabled ones when its alerting is off).

    Raises:
        SLOSpecError: an objective of 100 % or an unusable window, when alerting is on.
    """
    if slo.alerting.enabled:
        error_budget(slo)
    windows = burn_windows(slo, min_window_s=min_window_s if slo.alerting.enabled else 0.0)
    names = tuple(dict.fromkeys(w.severity for w in windows))
    return [
        AlertRuleInfo(
            name=rule_name(slo, sev),
            kind=SLO_KIND,
            slo_name=slo.name,
            severity=sev,
            labels=dict(slo.alerting.labels),
            enabled=slo.alerting.enabled,
        )
        for sev in (names if slo.alerting.enabled else names[:1])
    ]


def save_slo_rules(store: Store, slos: Sequence[SLO], *, min_window_s: float = 0.0) -> None:
    """Store the alert rules of each SLO (validated first: all or none are saved)."""
    rules = [r for slo in slos for r in slo_rules(slo, min_window_s=min_window_s)]
    names = {r.name for r in rules}
    applied = {slo.name for slo in slos}
    stale = [
        r.name
        for r in list_alert_rules(store)
        if r.kind == SLO_KIND and r.slo_name in applied and r.name not in names
    ]
    delete_alert_rules(store, stale)
    for r in rules:
        save_alert_rule(store, r)


def load_slos(store: Store) -> dict[str, SLO]:
    """The stored SLOs by name, each whole (``interpolate`` and ``alerting`` included)."""
    return {slo.name: slo for slo in list_slos(store)}


def apply_slos(store: Store, slos: Sequence[SLO], *, min_window_s: float = 0.0) -> list[str]:
    """Store SLOs with their alert rules, after checking every SLO's alerting; the scrape
    interval ``min_window_s`` is stored with them, for the evaluator.

    Returns:
        One line per SLO whose threshold is not a bucket bound of the stored histograms
        (before any is stored, of vLLM's, whose release fixes them).

    Raises:
        SLOSpecError: an SLO cannot alert as written (nothing is stored).
    """
    for slo in slos:
        slo_rules(slo, min_window_s=min_window_s)
    save_slos(store, slos, scrape_interval_s=min_window_s or None)
    save_slo_rules(store, slos, min_window_s=min_window_s)
    reader = SliReader(store, time.time())
    out = []
    for slo in slos:
        note = reader.note(slo) if reader.bounds(slo) else _vllm_note(slo)
        if note is not None:
            out.append(note.message(slo.name))
    return out


def _vllm_note(slo: SLO) -> BoundaryNote | None:
    """Where the threshold falls among vLLM's own bucket bounds, when it is not one."""
    if slo.sli is SLI.ERROR_RATE:
        return None
    bounds = engine_bounds("vllm", slo.sli.value) or ()
    lower = max((b for b in bounds if b <= slo.threshold), default=None)
    if not bounds or lower == slo.threshold:
        return None
    upper = min((b for b in bounds if b > slo.threshold), default=None)
    interpolated = slo.interpolate and lower is not None and upper is not None
    return BoundaryNote(f"vLLM {slo.sli.value}", slo.threshold, lower, upper, interpolated)


def delete_slo_and_rules(store: Store, name: str) -> None:
    """Delete an SLO and its burn-rate alert rules (with their events).

    Raises:
        ConfigError: no SLO has this name (nothing is deleted).
    """
    delete_slo(store, name)
    rules = [r.name for r in list_alert_rules(store) if r.kind == SLO_KIND and r.slo_name == name]
    delete_alert_rules(store, rules)
