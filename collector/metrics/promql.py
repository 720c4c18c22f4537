"""PromQL text: selector matchers and name regexes.

A target is a Prometheus ``job``/``instance`` pair, named ``job/instance`` as the agent names
the targets it reads through ``--scrape prometheus=`` (a bare name is an ``instance``);
``pool`` is the label a user adds by relabelling and ``model`` is vLLM's ``model_name``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from slotune.collector.slo import Selector


def quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def split_target(target: str) -> tuple[str | None, str]:
    """(job, instance) of a target name; a bare name is an instance of any job."""
    job, sep, instance = target.partition("/")
    return (job, instance) if sep else (None, target)


def target_matchers(target: str) -> list[str]:
    """Matchers of one target name (``job/instance`` or an ``instance``)."""
    job, instance = split_target(target)
    return ([] if job is None else [f"job={quote(job)}"]) + [f"instance={quote(instance)}"]


def selector_matchers(selector: Selector) -> list[str]:
    out = target_matchers(selector.target) if selector.target is not None else []
    if selector.pool is not None:
        out.append(f"pool={quote(selector.pool)}")
    if selector.model is not None:
        out.append(f"model_name={quote(selector.model)}")
    return out


def group_labels(selector: Selector) -> tuple[str, ...]:
    """The labels :func:`selector_matchers` read: a query summed ``by`` them can be split
    per selector (:func:`keeps`)."""
    return (
        (("job", "instance") if selector.target is not None else ())
        + (("pool",) if selector.pool is not None else ())
        + (("model_name",) if selector.model is not None else ())
    )


def keeps(selector: Selector, labels: Mapping[str, str]) -> bool:
    """Whether :func:`selector_matchers` keep a series (or a group summed ``by`` its
    :func:`group_labels`) with these labels; a missing label is the empty string, as in
    PromQL."""
    wanted: list[tuple[str, str]] = []
    if selector.target is not None:
        job, instance = split_target(selector.target)
        wanted += [("instance", instance)] + ([] if job is None else [("job", job)])
    if selector.pool is not None:
        wanted.append(("pool", selector.pool))
    if selector.model is not None:
        wanted.append(("model_name", selector.model))
    return all(labels.get(k, "") == v for k, v in wanted)


def any_of(selectors: Iterable[Selector]) -> list[str]:
    """Matchers that keep the series of any of ``selectors`` (and maybe more, which
    :func:`keeps` drops): a regex of every value of each label all of them name."""
    chosen = list(selectors)

    def alternatives(values: Iterable[str]) -> str:
        return quote("|".join(re.escape(v) for v in sorted(set(values))))

    out = []
    targets = [split_target(s.target) for s in chosen if s.target is not None]
    if chosen and len(targets) == len(chosen):
        out.append(f"instance=~{alternatives(i for _, i in targets)}")
        jobs = [j for j, _ in targets if j is not None]
        if len(jobs) == len(targets):
            out.append(f"job=~{alternatives(jobs)}")
    pools = [s.pool for s in chosen if s.pool is not None]
    if chosen and len(pools) == len(chosen):
        out.append(f"pool=~{alternatives(pools)}")
    models = [s.model for s in chosen if s.model is not None]
    if chosen and len(models) == len(chosen):
        out.append(f"model_name=~{alternatives(models)}")
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


def by(labels: Iterable[str]) -> str:
    """A ``by`` clause: ``by (le)``, ``by (job, instance, le)``."""
    return f"by ({', '.join(labels)})"


def newest_sample(
    names: Iterable[str], matchers: Iterable[str] = (), group: Iterable[str] = ()
) -> str:
    """The newest sample time of the series named one of ``names`` per ``group`` (each name
    apart; the caller takes the max), within the lookback (``timestamp`` gives a sample's own
    time only over a plain selector)."""
    return per_name(names, matchers, f"max {by(group)} (timestamp({{}}))")
