"""Hypothesis settings of the fuzzing suite.

Every property runs ``SLOTUNE_FUZZ_EXAMPLES`` examples (default 40, a few seconds in all), so
the suite stays fast; a longer search is the same tests with a larger count, e.g.
``SLOTUNE_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest -q tests/fuzz``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "slotune-fuzz",
    max_examples=int(os.environ.get("SLOTUNE_FUZZ_EXAMPLES", "40")),
    deadline=None,  # no timed assertions: a loaded machine must not fail a property
    database=None,  # nothing written into the working tree
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=os.environ.get("CI") == "true",  # reproducible in CI, searching locally
)
settings.load_profile("slotune-fuzz")
