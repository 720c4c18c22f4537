"""The tuner package loads its parts on first use.

``slotune emulate`` (one per launched trial) needs only the simulator and the HTTP server;
the store, SQLAlchemy and Optuna must not be loaded on its way.
"""

from __future__ import annotations

import json
import subprocess
import sys


def test_the_emulated_engine_does_not_load_the_store_or_optuna() -> None:
    probe = (
        "import json, sys; import slotune.tuner.emulate; "
        "print(json.dumps([m for m in ('sqlalchemy', 'alembic', 'optuna', "
        "'slotune.collector.store') if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout) == []
