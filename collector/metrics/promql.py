"""PromQL text: selector matchers and name regexes.

A target is a Prometheus ``job``/``instance`` pair, named ``job/instance`` as the agent names
the targets it reads through ``--scrape prometheus=`` (a bare name is an ``instance``);
``pool`` is the label a user adds by relabelling and ``model`` is vLLM's ``model_name``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from slotune.collector.slo import Selector


def quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def target_matchers(target: str) -> list[str]:
    """Matchers of one target name (``job/instance`` or an ``instance``)."""
    job, sep, instance = target.partition("/")
    if sep:
        return [f"job={quote(job)}", f"instance={quote(instance)}"]
    return [f"instance={quote(target)}"]


def selector_matchers(selector: Selector) -> list[str]:
    out = target_matchers(selector.target) if selector.target is not None else []
    if selector.pool is not None:
        out.append(f"pool={quote(selector.pool)}")
    if selector.model is not None:
        out.append(f"model_name={quote(selector.model)}")
    return out


def series(names: Iterable[str], matchers: Iterable[str] = ()) -> str:
    """A selector of every series named one of ``names`` that the matchers keep."""
    alternatives = "|".join(re.escape(n) for n in sorted(set(names)))
    return "{" + ",".join([f"__name__=~{quote(alternatives)}", *matchers]) + "}"


def duration(seconds: float) -> str:
    """A PromQL duration in whole milliseconds (``300000ms``), exact for any window."""
    return f"{round(seconds * 1000)}ms"


SERIES_LABEL = "series"


def per_name(names: Iterable[str], matchers: Iterable[str], shape: str) -> str:
    """``shape`` (``{}`` stands for the selector) over each name apart, each result labelled
    ``series="<name>"``, joined with ``or``.

    Functions such as ``increase`` and ``timestamp`` drop the metric name, so series that
    differ only by it (an engine exporting an old and a new name, SGLang's finished and
    aborted counters) would collide in one selector; apart, the caller adds or picks them.
    """
    kept = list(matchers)
    return " or ".join(
        f"label_replace({shape.format(series([n], kept))}, {quote(SERIES_LABEL)}, {quote(n)}, "
        '"", "")'
        for n in dict.fromkeys(names)
    )


def newest_sample(names: Iterable[str], matchers: Iterable[str] = ()) -> str:
    """The newest sample time of the series named one of ``names``, within the lookback
    (``timestamp`` gives a sample's own time only over a plain selector)."""
    return f"max({per_name(names, matchers, 'max(timestamp({}))')})"
