"""What the dashboard's forms write, checked by the same parsers as the command line.

An SLO form goes through ``parse_slo_yaml`` (what ``slotune slo apply`` reads), so a form
and a YAML file accept exactly the same values and fail with the same messages.
"""

from __future__ import annotations

import math

import yaml

from slotune.collector.agent.canonical import CANONICAL
from slotune.collector.errors import ConfigError
from slotune.collector.slo import SLO, parse_duration_s, parse_slo_yaml
from slotune.collector.store import AlertRuleInfo

FORM_SOURCE = "form"
OPS = (">", ">=", "<", "<=")


def slo_from_fields(
    *,
    name: str,
    spec: str,
    window: str = "30d",
    objective: str = "",
    model: str = "",
    pool: str = "",
    target: str = "",
    description: str = "",
) -> SLO:
    """One SLO from form fields (empty fields take the file format's defaults).

    Raises:
        SLOSpecError: as ``slotune slo apply`` would for the same values in a file.
    """
    item: dict[str, object] = {"name": name.strip(), "spec": spec.strip(), "window": window.strip()}
    if objective.strip():
        item["objective"] = objective.strip()
    selector = {k: v.strip() for k, v in (("model", model), ("pool", pool), ("target", target))}
    if any(selector.values()):
        item["selector"] = {k: v for k, v in selector.items() if v}
    if description.strip():
        item["description"] = description.strip()
    text = yaml.safe_dump({"slos": [item]}, sort_keys=False, allow_unicode=True)
    return parse_slo_yaml(text, source=FORM_SOURCE)[0]


def threshold_rule_from_fields(
    *, name: str, metric: str, op: str, threshold: str, for_: str = "0s", severity: str = "warning"
) -> AlertRuleInfo:
    """A threshold alert rule (``metric op threshold`` held for ``for_``) from form fields.

    Raises:
        ConfigError: naming the field and what it takes.
    """
    if not name.strip():
        raise ConfigError("field 'name' is required (e.g. kv-usage-high)")
    if metric not in CANONICAL:
        raise ConfigError(
            f"field 'metric': {metric!r} is not a stored metric; use one of "
            + ", ".join(sorted(CANONICAL))
        )
    if op not in OPS:
        raise ConfigError(f"field 'op': {op!r} is unknown; use one of {', '.join(OPS)}")
    try:
        value = float(threshold)
    except ValueError:
        unit = CANONICAL[metric].unit
        raise ConfigError(
            f"field 'threshold': {threshold!r} is not a number; give it in {unit} "
            f"(the unit {metric} is stored in)"
        ) from None
    if not math.isfinite(value):
        raise ConfigError("field 'threshold' must be a finite number")
    for_s = parse_duration_s(for_ or "0s", field_name="field 'for'")
    return AlertRuleInfo(
        name=name.strip(),
        kind="threshold",
        metric=metric,
        op=op,
        threshold=value,
        for_s=for_s,
        severity=severity,
    )


def burn_rule_from_fields(*, name: str, slo_name: str, known_slos: list[str]) -> AlertRuleInfo:
    """An error-budget burn-rate rule on a declared SLO.

    Raises:
        ConfigError: no name, or the SLO is not declared.
    """
    if not name.strip():
        raise ConfigError("field 'name' is required (e.g. chat-ttft-burn)")
    if slo_name not in known_slos:
        raise ConfigError(f"field 'slo': no SLO named {slo_name!r}; declare it on the SLOs page")
    return AlertRuleInfo(name=name.strip(), kind="slo_burn", slo_name=slo_name, severity="page")
