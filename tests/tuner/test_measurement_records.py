"""A trial's measurement reads back from the user attributes it is stored in."""

import json

from slotune.collector.records import RequestRecord
from slotune.collector.slo import parse_slos
from slotune.collector.summary import summarize
from slotune.tuner.tune.objectives import CurvePoint, Measurement
from slotune.tuner.tune.rechecks import DefaultRepeats, Recheck

RECORDS = [
    RequestRecord(
        str(i), i * 0.5, i * 0.5 + 0.25, i * 0.5 + 1.0, (0.25, 0.5, 1.0), (1, 2, 1), 10, 4
    )
    for i in range(4)
]
SUMMARY = summarize(RECORDS, parse_slos(["ttft:p99<=500ms", "error_rate<=1%"]))


def test_a_measurement_reads_back_from_its_stored_attributes() -> None:
    m = Measurement(
        values=(2.0,),
        constraints={"ttft-p99": -0.01, "launch": 0.0},
        rate=2.0,
        summary=SUMMARY,
        curve=(
            CurvePoint(1.0, 1.0, True),
            CurvePoint(2.0, 2.0, True),
            CurvePoint(None, 0.5, False),
        ),
        engine={"prefix_hit_rate": 0.25, "server_config": {"values": {"max_num_seqs": 8}}},
        unsteady_rates=(4.0,),
    )
    stored = json.loads(json.dumps(m.to_attrs()))
    assert Measurement.from_attrs(stored, m.values, m.constraints) == m
    assert Measurement.from_attrs(stored).curve[2].slos_met is False


def test_a_failed_trial_stored_with_only_its_reason_reads_as_nothing_measured() -> None:
    m = Measurement.from_attrs({"failure": "engine failed to start: out of memory"}, (0.0,))
    assert m.failure == "engine failed to start: out of memory"
    assert (m.summary, m.curve, m.rate, dict(m.engine), m.unsteady_rates) == (
        None,
        (),
        None,
        {},
        (),
    )


def test_a_recheck_and_the_default_repeats_read_back_from_the_study() -> None:
    r = Recheck(
        3, {"max_num_seqs": 64}, {"max_num_seqs": 64, "block_size": 16}, {"0": 4.0}, 4.0, True
    )
    r = r.with_run(1, 3.5, True).with_run(2, 4.5, False)
    assert (r.worst_value, r.feasible, list(r.values_by_seed)) == (3.5, False, ["0", "1", "2"])
    assert Recheck.from_attrs(json.loads(json.dumps(r.to_attrs()))) == r
    repeats = DefaultRepeats(0, {"0": 2.0, "1": 2.25}, 1)
    assert DefaultRepeats.from_attrs(json.loads(json.dumps(repeats.to_attrs()))) == repeats
