"""Building the ``slotune`` CLI loads no heavy library: they load inside the commands.

Every ``slotune`` run (help, shell completion, each ``slotune emulate`` a tuning trial
starts) builds the whole command tree first, so a library imported at the top of a ui/cli
module is paid by all of them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = (
    "sqlalchemy",
    "alembic",
    "optuna",
    "aiohttp",
    "numpy",
    "httpx",
    "streamlit",
    "opentelemetry",
    "slotune.tuner",
    "slotune.collector.store",
    "slotune.collector.agent",
    "slotune.collector.bench",
    "slotune.collector.slo",
)

# Runs what the `slotune` script runs (ui.cli.main) on ARGV, then reports which of HEAVY are
# loaded on stderr's last line (stdout carries the help).
_PROBE = """
import json, sys
from slotune.ui.cli import main
heavy, sys.argv = json.loads(sys.argv[1]), ["slotune", *json.loads(sys.argv[2])]
try:
    main()
except SystemExit as e:
    code = e.code
else:
    code = 0
loaded = sorted(m for m in heavy if m in sys.modules)
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["tune", "--help"],
        ["bench", "list", "--help"],
        ["db", "prune", "--help"],
        ["--version"],
    ],
    ids=" ".join,
)
def test_building_the_cli_loads_no_heavy_library(argv: list[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(HEAVY), json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, result.stdout
    assert report["loaded"] == [], f"`slotune {' '.join(argv)}` imported {report['loaded']}"
