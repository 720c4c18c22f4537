"""``slo export --format prometheus`` loads in VictoriaMetrics' vmalert as in Prometheus."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from _tools import require_binary
from test_sli_contract import SLOS

from slotune.collector.alerts.promrules import prometheus_rules


def test_the_rule_file_loads_in_vmalert(tmp_path: Path) -> None:
    vmalert = require_binary("vmalert", "victoria-metrics")
    bounds = {"ttft": [0.1, 0.5, 1.0], "itl": [0.025, 0.05, 0.1], "tpot": [0.025, 0.05, 0.1]}
    bounds["e2e"] = [1.0, 5.0, 10.0]
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump(prometheus_rules(SLOS, "vllm", bounds)))
    done = subprocess.run(
        [vmalert, f"-rule={rules}", "-dryRun"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
