"""`slotune demo` — the README's first command — end to end, on a small budget."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from _tools import SLOTUNE

from slotune.collector.slo import parse_slos
from slotune.collector.summary import summarize
from slotune.tuner.demo import CONFIRM_TRIES, confirm
from slotune.tuner.emulate.lag import LagReport
from slotune.tuner.tune.objectives import Measurement


def _leftover_processes(marker: str) -> list[str]:
    """Command lines of live processes whose environment carries ``marker``."""
    out = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker.encode() in (proc / "environ").read_bytes():
                out.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue  # gone, or not ours to read
    return out


@pytest.mark.slow
def test_demo_runs_on_the_default_store_and_leaves_no_process(tmp_path: Path) -> None:
    marker = f"SLOTUNE_DEMO_TEST={tmp_path}"
    env = {
        **os.environ,
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "TMPDIR": str(tmp_path),
        "COLUMNS": "200",
        "SLOTUNE_DEMO_TEST": str(tmp_path),
    }
    env.pop("SLOTUNE_DB", None)
    demo = subprocess.run(
        [SLOTUNE, "demo", "--trials", "2", "--num-requests", "12", "--speedup", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "vLLM default configuration" in demo.stdout
    assert "req/s under the SLOs" in demo.stdout or "at no rate tried" in demo.stdout
    verdicts = ("gain over default", "no gain: the default", "no configuration met every SLO")
    assert any(v in demo.stdout for v in verdicts)
    match = re.search(r"as study (demo-\S+)", demo.stdout)
    assert match, demo.stdout
    db = tmp_path / "data" / "slotune" / "slotune.db"
    assert str(db) in demo.stdout
    # The last line opens the results in the dashboard.
    assert demo.stdout.strip().splitlines()[-1].strip().endswith(f"--db sqlite:///{db} ui")
    assert _leftover_processes(marker) == []

    show = subprocess.run(
        [SLOTUNE, "tune", "show", match.group(1), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert show.returncode == 0, show.stderr[-2000:]
    report = json.loads(show.stdout)
    assert report["backend"] == "launch"
    assert len(report["trial_details"]) >= 2
    assert report["default"] is not None
    # the other command the demo prints, as printed, when a configuration met every SLO (a
    # loaded machine can leave none)
    if "slotune tune export" not in demo.stdout:
        assert report["best"] is None and "no configuration met every SLO" in demo.stdout
        return
    export = subprocess.run(
        [SLOTUNE, "tune", "export", match.group(1), "--format", "vllm"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert export.returncode == 0, export.stderr[-2000:]
    assert "vllm serve" in export.stdout


SUMMARY = summarize([], parse_slos(["ttft:p99<=500ms"]))


def _measurement(feasible: bool, num_late_steps: int) -> Measurement:
    lag = LagReport(num_steps=1000, num_late_steps=num_late_steps).to_dict()
    return Measurement(
        values=(1.0,),
        constraints={"ttft:p99<=500ms": -1.0 if feasible else 1.0},
        summary=SUMMARY,
        engine={"emulator_lag": lag},
    )


def test_a_confirmation_on_a_lagging_engine_is_run_again_and_says_why() -> None:
    said: list[str] = []
    runs = iter([_measurement(False, 200), _measurement(True, 3)])
    confirmed, attainment, note = confirm(lambda: next(runs), "default", said.append)
    assert (confirmed, note) == (True, "")
    assert attainment == [a.to_dict() for a in SUMMARY.slo_attainment]
    assert len(said) == 1
    assert said[0].startswith("  default: confirmation run 1 is not trustworthy (")
    assert "200 of 1,000 steps (20.0%)" in said[0] and said[0].endswith("running it again")


def test_a_confirmation_never_trustworthy_is_no_verdict() -> None:
    said: list[str] = []
    confirmed, _, note = confirm(lambda: _measurement(False, 500), "best", said.append)
    assert confirmed is None
    assert note.startswith("not trustworthy: the emulated engine fell behind real time")
    assert len(said) == CONFIRM_TRIES and said[-1].endswith("giving up")


def test_a_real_engine_or_a_punctual_one_is_confirmed_at_once() -> None:
    said: list[str] = []
    plain = Measurement(values=(1.0,), constraints={"x": 1.0})
    assert confirm(lambda: plain, "default", said.append) == (False, [], "")
    assert confirm(lambda: _measurement(True, 10), "best", said.append)[0] is True
    assert said == []
