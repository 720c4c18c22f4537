import pytest

from slotune.collector.errors import SLOSpecError
from slotune.collector.records import RequestRecord
from slotune.collector.slo import SLI, evaluate, parse_slo


@pytest.mark.parametrize(
    ("spec", "sli", "threshold", "objective"),
    [
        ("ttft:p99<=500ms", SLI.TTFT, 0.5, 0.99),
        ("itl:p95<=50ms", SLI.ITL, 0.05, 0.95),
        ("tpot:p90<=40ms", SLI.TPOT, 0.04, 0.90),
        ("e2e:p99<=20s", SLI.E2E, 20.0, 0.99),
        ("error_rate<=1%", SLI.ERROR_RATE, 0.01, 0.99),
    ],
)
def test_shorthand_round_trips(spec: str, sli: SLI, threshold: float, objective: float) -> None:
    slo = parse_slo(spec)
    assert slo.sli is sli
    assert slo.threshold == pytest.approx(threshold)
    assert slo.objective == pytest.approx(objective)
    assert slo.spec == spec


@pytest.mark.parametrize(
    "bad", ["ttft<=500ms", "ttft:p100<=1s", "ttft:p99<=500", "foo:p9<=1s", "error_rate<=150%"]
)
def test_bad_shorthand_names_accepted_forms(bad: str) -> None:
    with pytest.raises(SLOSpecError):
        parse_slo(bad)


def test_percentile_and_good_fraction_agree() -> None:
    recs = [
        RequestRecord(str(i), 0.0, t, t + 0.01, (t, t + 0.01), (1, 1), 1, 2)
        for i, t in enumerate([0.1] * 98 + [0.9, 0.95])
    ]
    att = evaluate(parse_slo("ttft:p98<=500ms"), recs)
    assert att.attainment == pytest.approx(0.98)
    assert att.is_met
    assert not evaluate(parse_slo("ttft:p99<=500ms"), recs).is_met
