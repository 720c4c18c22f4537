"""The contract of :class:`~collector.agent.base.Source`, run on every registered source.

One suite over ``registry.SOURCES`` (as Optuna runs one storage suite over every storage):
adding a source adds its cases here. A kind's material is the expositions named
``<kind>_*`` (a URL-less kind reads its built-in fake instead).
"""

from __future__ import annotations

import asyncio

import pytest
from agent_helpers import DATA, data_text

from slotune.collector.agent.base import Response, Scrape, Source
from slotune.collector.agent.canonical import CANONICAL
from slotune.collector.agent.promsource import PromTextSource
from slotune.collector.agent.registry import SOURCES, make_source
from slotune.collector.agent.targets import make_target
from slotune.collector.alerts.promrules import error_ratio_expr
from slotune.collector.errors import SourceError
from slotune.collector.slo import parse_slo
from slotune.collector.vocabulary import SourceKind

KINDS = list(SOURCES)
URL_KINDS = [k for k in KINDS if k.needs_url]
EXPOSITIONS = (".prom", ".jsonish")  # what an endpoint serves (not, say, a counters CSV)


class Bodies:
    """The sources' HTTP seam: one body for every URL, or a failure for every URL."""

    def __init__(self, body: str | None) -> None:
        self.body = body

    async def get(self, url: str) -> Response:
        if self.body is None:
            raise SourceError(f"{url}: connection refused")
        return Response(self.body)


def target_url(kind: SourceKind) -> str:
    return "http://127.0.0.1:9" if kind.needs_url else "fake"


def collect(source: Source, body: str | None) -> Scrape:
    try:
        return asyncio.run(source.collect(Bodies(body)))
    finally:
        source.close()


def material(kind: SourceKind) -> list[str]:
    return sorted(p.name for p in DATA.glob(f"{kind.value}_*") if p.suffix in EXPOSITIONS)


def material_scrapes(kind: SourceKind) -> list[Scrape]:
    if not kind.needs_url:
        return [collect(make_source(make_target(kind, "fake", node="n")), None)]
    return [collect(SOURCES[kind]([name]), data_text(name)) for name in material(kind)]


def test_every_kind_of_the_vocabulary_has_a_source() -> None:
    assert set(SOURCES) == set(SourceKind)


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_source_reads_the_kind_it_is_registered_for(kind: SourceKind) -> None:
    assert SOURCES[kind].kind is kind


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_a_target_gets_a_fresh_source_on_its_own_urls(kind: SourceKind) -> None:
    target = make_target(kind, target_url(kind), node="n")
    first, second = make_source(target), make_source(target)
    try:
        assert isinstance(first, SOURCES[kind]) and first is not second
        if kind.needs_url:
            assert target.metrics_urls == tuple(
                "http://127.0.0.1:9" + p for p in kind.default_paths
            )
            assert len(first.urls) == len(target.metrics_urls)
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("kind", URL_KINDS, ids=str)
def test_an_unreachable_target_raises_source_error(kind: SourceKind) -> None:
    source = make_source(make_target(kind, target_url(kind), node="n"))
    with pytest.raises(SourceError):
        collect(source, None)


@pytest.mark.parametrize("kind", URL_KINDS, ids=str)
def test_a_body_that_is_no_metrics_gives_source_error_or_nothing_canonical(
    kind: SourceKind,
) -> None:
    source = make_source(make_target(kind, target_url(kind), node="n"))
    try:
        scrape = collect(source, "<html><body>502 Bad Gateway</body></html>\n")
    except SourceError:
        return
    assert scrape.canonical == ()
    assert all(p.scrape.canonical == () for p in scrape.parts)


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_the_material_maps_onto_known_canonical_families_of_their_type(kind: SourceKind) -> None:
    scrapes = material_scrapes(kind)
    assert scrapes, f"no material for {kind}: add tests/collector/agent/data/{kind}_*"
    found = []
    for scrape in scrapes:
        for part in (scrape, *(p.scrape for p in scrape.parts)):
            for fam in part.canonical:
                assert fam.name in CANONICAL, fam.name
                assert fam.type is CANONICAL[fam.name].type, fam.name
                assert all(s.value == s.value for s in fam.samples), fam.name  # no NaN
                found.append(fam.name)
    assert found, f"{kind}: its material gives no canonical family"


@pytest.mark.parametrize("kind", [k for k in KINDS if k.federate_prefix], ids=str)
def test_a_federated_kind_reads_text_and_its_prefix_names_its_series(kind: SourceKind) -> None:
    # /federate hands a target's families to the source whose prefix they carry (some
    # releases name their series without it: TensorRT-LLM's first Prometheus excerpt)
    assert issubclass(SOURCES[kind], PromTextSource)
    raw = [collect(SOURCES[kind]([n]), data_text(n)).raw for n in material(kind)]
    assert any(f.name.startswith(kind.federate_prefix) for families in raw for f in families)


@pytest.mark.parametrize("kind", [k for k in KINDS if k.is_engine], ids=str)
def test_an_engine_source_says_how_its_requests_end_and_its_rules_export(kind: SourceKind) -> None:
    source = SOURCES[kind]
    assert issubclass(source, PromTextSource) and source.outcomes is not None
    assert all(r.target in CANONICAL for r in source.export_rules())
    # the error-rate SLI has a Prometheus rule on every engine
    expr = error_ratio_expr(parse_slo("error_rate<=1%"), kind.value, 300)
    assert source.outcomes.finished in expr
