"""What the dashboard's SLO form writes, checked by the command line's parser.

The form goes through ``parse_slo_yaml`` (what ``slotune slo apply`` reads), so a form and a
YAML file accept exactly the same values and fail with the same messages. (Alert rules from
the dashboard use ``collector.alerts.rules.parse_rule``, ``slotune alerts add``'s parser.)
"""

from __future__ import annotations

import yaml

from slotune.collector.slo import SLO, parse_slo_yaml

FORM_SOURCE = "form"


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
