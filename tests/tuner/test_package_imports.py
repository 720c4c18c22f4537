"""The tuner package loads its parts on first use.

``slotune emulate`` (one per launched trial) needs only the simulator and the HTTP server;
the store, SQLAlchemy and Optuna must not be loaded on its way.
"""

from __future__ import annotations

import json
import subprocess
import sys

import tuner


def test_the_emulated_engine_does_not_load_the_store_or_optuna() -> None:
    probe = ("import json, sys; import tuner.sim.emulate; "
             "print(json.dumps([m for m in ('sqlalchemy', 'alembic', 'optuna', "
             "'collector.store') if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120)
    assert json.loads(out.stdout) == []


def test_every_public_name_resolves() -> None:
    for name in tuner.__all__:
        assert getattr(tuner, name) is not None
    assert tuner.StudyProgress.__name__ == "Progress"
