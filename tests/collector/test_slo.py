"""The SLO shorthand, the YAML spec and per-request goodness (collector/slo/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotune.collector.errors import SLOSpecError
from slotune.collector.records import RequestRecord
from slotune.collector.slo import (
    SLI,
    SLO,
    Selector,
    evaluate,
    load_slo_file,
    parse_slo,
    parse_slo_yaml,
    parse_slos,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "slos.yaml"


@pytest.mark.parametrize(
    ("spec", "threshold", "percentile", "name"),
    [
        ("ttft:p99 < 0.5 s", 0.5, 99.0, "ttft-p99"),
        ("TTFT:P99<=500MS", 0.5, 99.0, "ttft-p99"),
        ("itl:p99.9≤20ms", 0.02, 99.9, "itl-p99.9"),
        ("e2e:p50<=2m", 120.0, 50.0, "e2e-p50"),
        ("ttft:p99<=500µs", 0.0005, 99.0, "ttft-p99"),
        ("ttft:p99<=250us", 0.00025, 99.0, "ttft-p99"),
    ],
)
def test_latency_shorthand_variants(
    spec: str, threshold: float, percentile: float, name: str
) -> None:
    slo = parse_slo(spec)
    assert (slo.threshold, slo.percentile, slo.name) == (pytest.approx(threshold), percentile, name)
    assert slo.objective == pytest.approx(percentile / 100)


@pytest.mark.parametrize(
    ("spec", "threshold"),
    [("error_rate<=0.5%", 0.005), ("Error_Rate<=0.02", 0.02), ("error_rate<=0%", 0.0)],
)
def test_error_rate_shorthand(spec: str, threshold: float) -> None:
    slo = parse_slo(spec)
    assert slo.sli is SLI.ERROR_RATE and slo.percentile is None
    assert slo.threshold == pytest.approx(threshold)
    assert slo.objective == pytest.approx(1 - threshold)


@pytest.mark.parametrize("bad", ["ttft:p99<=0ms", "ttft:p0<=1s", "error_rate<=100%", "", "p99"])
def test_bad_shorthand_is_an_slo_error(bad: str) -> None:
    with pytest.raises(SLOSpecError, match="SLO"):
        parse_slo(bad)


def test_shorthand_names_must_be_unique() -> None:
    with pytest.raises(SLOSpecError, match="two SLOs are named 'ttft-p99'"):
        parse_slos(["ttft:p99<=1s", "ttft:p99<=2s"])


def test_example_file_parses() -> None:
    slos = {s.name: s for s in load_slo_file(EXAMPLES)}
    assert list(slos) == ["chat-ttft", "chat-itl", "chat-tpot", "batch-e2e", "errors"]
    assert slos["chat-ttft"].selector == Selector(
        model="meta-llama/Llama-3.1-8B-Instruct", pool="chat"
    )
    assert slos["chat-tpot"].spec == "tpot:p90<=40ms"
    assert (slos["batch-e2e"].objective, slos["batch-e2e"].window_s) == (
        pytest.approx(0.995),
        7 * 86400.0,
    )


def test_fields_form_equals_shorthand() -> None:
    [fields] = parse_slo_yaml(
        "- name: a\n  sli: itl\n  percentile: p95\n  threshold: 50ms\n"
        "  objective: 99.5\n  description: streaming\n"
    )
    assert fields == SLO(
        name="a",
        sli=SLI.ITL,
        threshold=0.05,
        percentile=95.0,
        objective=0.995,
        description="streaming",
    )
    [err] = parse_slo_yaml("slos:\n  - name: e\n    sli: error_rate\n    threshold: 2%\n")
    assert err.spec == "error_rate<=2%"


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("slos:\n  - name: A\n", ":2:", "field 'name' is required"),
        (
            "slos:\n  - name: a\n    sli: ttft\n    percentile: 99\n    threshold: 500\n",
            ":5:",
            "'500' needs a unit, e.g. 500ms",
        ),
        (
            "slos:\n  - name: a\n    spec: ttft:p99<=1s\n    objective: 150%\n",
            ":4:",
            "must be a fraction like 0.995 or 99.5%",
        ),
        (
            "slos:\n  - name: a\n    spec: ttft:p99<=1s\n    window: forever\n",
            ":4:",
            "field 'window': 'forever' is not a duration",
        ),
        (
            "slos:\n  - name: a\n    spec: ttft:p99<=1s\n    selector: {gpu: h100}\n",
            ":4:",
            "selector field 'gpu' is unknown; allowed: model, pool, target",
        ),
        (
            "slos:\n  - name: a\n    spec: ttft:p99<=1s\n    budget: 3\n",
            ":4:",
            "unknown field 'budget'",
        ),
        (
            "slos:\n  - name: a\n    spec: ttft:p99<=1s\n  - name: a\n    spec: itl:p95<=5ms\n",
            ":4:",
            "'a' is used twice",
        ),
        ("slos:\n  - name: a\n    spec: ttft<=1s\n", ":3:", "accepted forms"),
        ("slos: [\n", ":2:", "not valid YAML"),
        ("", "f.yaml:", "the file is empty"),
        ("slos: {a: 1}\n", ":1:", "expected a list under 'slos'"),
    ],
)
def test_file_errors_name_line_field_and_form(text: str, where: str, message: str) -> None:
    with pytest.raises(SLOSpecError) as e:
        parse_slo_yaml(text, source="f.yaml")
    assert str(e.value).startswith("f.yaml") and where in str(e.value)
    assert message in str(e.value)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(SLOSpecError, match="cannot read the SLO file"):
        load_slo_file(tmp_path / "missing.yaml")


def record(
    ttft_s: float | None,
    e2e_s: float | None,
    chunks: tuple[float, ...] = (),
    tokens: tuple[int, ...] = (),
    output_tokens: int | None = None,
    error: str | None = None,
) -> RequestRecord:
    return RequestRecord("r", 0.0, ttft_s, e2e_s, chunks, tokens, 10, output_tokens, error)


def test_good_means_within_threshold_per_sli() -> None:
    ok = record(0.2, 2.2, (0.2, 0.3, 2.2), (1, 1, 20), output_tokens=22)
    assert parse_slo("ttft:p99<=200ms").is_good(ok)
    assert not parse_slo("ttft:p99<=199ms").is_good(ok)
    assert parse_slo("e2e:p99<=2.2s").is_good(ok)
    assert parse_slo("tpot:p90<=100ms").is_good(ok)  # (2.2 - 0.2) / 21 = 95 ms
    assert not parse_slo("tpot:p90<=90ms").is_good(ok)
    # itl counts token gaps pooled over the run: no request is bad for it on its own
    assert parse_slo("itl:p50<=1ms").is_good(ok)
    assert parse_slo("error_rate<=1%").is_good(ok)


def test_itl_counts_every_token_gap_of_the_completed_requests() -> None:
    # per-token gaps 0.1 s (1 token) and 1.9/20 = 95 ms (20 tokens); a failed request's
    # gaps are left out
    ok = record(0.2, 2.2, (0.2, 0.3, 2.2), (1, 1, 20), output_tokens=22)
    failed = record(0.1, None, (0.1, 5.0), (1, 1), error="timeout")
    att = evaluate(parse_slo("itl:p50<=95ms"), [ok, failed])
    assert (att.num_good, att.num_total) == (20, 21)
    assert att.value == pytest.approx(0.095)
    assert att.to_dict()["event"] == "token"
    assert evaluate(parse_slo("itl:p99<=99ms"), [ok]).num_good == 20


def test_failed_requests_are_never_good_and_undefined_values_never_bad() -> None:
    failed = record(0.1, None, error="timeout")
    assert not any(
        parse_slo(s).is_good(failed) for s in ("ttft:p99<=1s", "e2e:p99<=1s", "error_rate<=1%")
    )
    one_token = record(0.1, 0.1, (0.1,), (1,), output_tokens=1)
    assert parse_slo("tpot:p90<=1ms").is_good(one_token)
    assert parse_slo("itl:p90<=1ms").is_good(one_token)


def test_to_dict_names_units() -> None:
    d = parse_slo("ttft:p99<=500ms", selector=Selector(pool="chat")).to_dict()
    assert d == {
        "name": "ttft-p99",
        "spec": "ttft:p99<=500ms",
        "sli": "ttft",
        "percentile": 99.0,
        "threshold": 0.5,
        "objective": 0.99,
        "window_s": 2592000.0,
        "selector": {"pool": "chat"},
        "description": "",
    }


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "slos:\n  - {name: a, spec: 'ttft:p99<=500ms', window: 0s}\n",
            "window 0 s is out of range",
        ),
        (
            "slos:\n  - {name: a, spec: 'ttft:p99<=500ms', window: 99999999999999999999d}\n",
            "out of range; use 1m to 366d",
        ),
        (
            "slos:\n  - {name: a, sli: ttft, percentile: 99, "
            "threshold: 100000000000000000000000000000000000000000s}\n",
            "at most 1 day",
        ),
        ("slos:\n  - {name: a, spec: 'ttft:p99<=500ms', window: .nan}\n", "not a finite number"),
        ("[" * 100_000, "nests deeper"),
    ],
)
def test_absurd_slo_files_are_refused(text: str, match: str) -> None:
    with pytest.raises(SLOSpecError, match=match):
        parse_slo_yaml(text)


def test_a_binary_slo_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "slos.yaml"
    path.write_bytes(b"slos:\n\xff\xfe\x00")
    with pytest.raises(SLOSpecError, match="is not UTF-8 text"):
        load_slo_file(path)
