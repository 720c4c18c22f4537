"""The fuzzing suite: Hypothesis properties over every parser of untrusted input.

Each property runs ``SLOTUNE_FUZZ_EXAMPLES`` examples (default 40, seconds in all), so the
suite stays fast; a longer search is the same tests with a larger count, e.g.
``SLOTUNE_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest -q tests/fuzz``. The settings are
applied per test (``strategies.FUZZ``), never as a global profile, so other Hypothesis tests
keep theirs.
"""
