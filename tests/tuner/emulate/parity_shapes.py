"""What a scraper depends on in a Prometheus exposition, and the differences between two.

Compared per family: its type, its label names, the values of its enumerated labels
(``finished_reason``, ``mode``, ``is_streaming``, …: every label but those naming the server)
and its bucket bounds. Not compared: values and help texts.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True, slots=True)
class FamilyShape:
    """What a scraper depends on in one family."""

    type: str
    label_names: frozenset[str]
    label_values: frozenset[tuple[tuple[str, str], ...]]
    bucket_bounds: tuple[float, ...]


def family_shapes(
    text: str,
    prefix: str,
    server_labels: Collection[str],
    opaque: Collection[str] = (),
) -> dict[str, FamilyShape]:
    """The shape of every family named ``prefix…`` that has a series.

    Args:
        text: the exposition.
        prefix: the engine's metric prefix (``vllm:``, ``sglang:``).
        server_labels: labels whose values name the server, not the metric's meaning.
        opaque: families whose label values describe the machine (``cache_config_info``).
    """
    shapes: dict[str, FamilyShape] = {}
    skipped = {*server_labels, "le"}
    for family in text_string_to_metric_families(text):
        samples = [s for s in family.samples if not s.name.endswith("_created")]
        if not family.name.startswith(prefix) or not samples:
            continue
        names = frozenset(k for s in samples for k in s.labels if k != "le")
        values = frozenset(
            tuple(sorted((k, v) for k, v in s.labels.items() if k not in skipped))
            for s in samples
            if family.name not in opaque
        )
        bounds = sorted({float(s.labels["le"]) for s in samples if s.name.endswith("_bucket")})
        shapes[family.name] = FamilyShape(family.type, names, values, tuple(bounds))
    return shapes


def shape_diff(real: dict[str, FamilyShape], emulated: dict[str, FamilyShape]) -> list[str]:
    """One line per difference, empty when the emulator serves what the real release does."""
    lines = [f"missing {name} ({real[name].type})" for name in sorted(set(real) - set(emulated))]
    lines += [f"extra {name}" for name in sorted(set(emulated) - set(real))]
    for name in sorted(set(real) & set(emulated)):
        r, e = real[name], emulated[name]
        if r.type != e.type:
            lines.append(f"{name}: type {e.type}, real {r.type}")
        if r.label_names != e.label_names:
            lines.append(
                f"{name}: labels missing {sorted(r.label_names - e.label_names)}, "
                f"extra {sorted(e.label_names - r.label_names)}"
            )
        elif r.label_values != e.label_values:
            lines.append(
                f"{name}: label values missing {sorted(r.label_values - e.label_values)}, "
                f"extra {sorted(e.label_values - r.label_values)}"
            )
        if r.bucket_bounds != e.bucket_bounds:
            lines.append(f"{name}: buckets {e.bucket_bounds}, real {r.bucket_bounds}")
    return lines
