"""``docs/real-vllm.md`` §5 run as printed against the shared real vLLM: the commands of its
bash block, with the server's URL in place of ``http://127.0.0.1:8000``. The study finishes,
stores two trials of the one configuration the server runs, varies no parameter, and sends
no more requests than the page says it can."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from _tools import SLOTUNE
from real_vllm_helpers import read_metrics

from slotune.collector.store import upgrade
from slotune.tuner import show_study

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "real-vllm.md"


def section_commands(title: str) -> str:
    """The first bash block under the ``## <title>`` heading of the page."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```bash\n", 1)[1].split("```", 1)[0]


def stated_request_bound() -> int:
    """The most requests the page says the study sends ("at most N requests")."""
    section = DOC.read_text(encoding="utf-8").split("## 5. Tune against it\n", 1)[1]
    m = re.search(r"at most ([\d,]+) requests", section)
    assert m, "§5 states no request bound"
    return int(m.group(1).replace(",", ""))


def test_the_tuning_section_runs_as_written(real_vllm: str, tmp_path: Path) -> None:
    commands = section_commands("5. Tune against it")
    commands = commands.replace("http://127.0.0.1:8000", real_vllm)
    commands = re.sub(r"^slotune ", f"{SLOTUNE} ", commands, flags=re.M)
    db = tmp_path / "slotune.db"
    env = {**os.environ, "SLOTUNE_DB": f"sqlite:///{db}"}
    upgrade(env["SLOTUNE_DB"])  # §4 exported SLOTUNE_DB and ran `slotune db upgrade`
    before = read_metrics(real_vllm).value("vllm:request_success_total")
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-e", "-c", commands],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=3000,
    )
    took_s = time.monotonic() - started
    sent = read_metrics(real_vllm).value("vllm:request_success_total") - before
    assert done.returncode == 0, done.stderr[-3000:]
    named = re.search(r"^(\S+): 2 trials", done.stdout, re.M)
    assert named, done.stdout[-3000:]
    report = show_study(named.group(1), env["SLOTUNE_DB"])
    assert report.trials == 2 and all(t.params == {} for t in report.trial_details)
    assert 0 < sent <= stated_request_bound(), sent
    print(f"§5: {took_s:.0f} s, {sent:.0f} requests")  # the figures the page quotes
