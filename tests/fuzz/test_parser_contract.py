"""Every parser of the fuzz harness's registry (benchmarks/fuzz_parsers.py) given each hostile
case once: it accepts, or refuses with its own error in one line; nothing else escapes. And no
module decodes user input around the bounded readers (collector/jsonfile.py, yamlfile.py,
textfile.py), so a new reader meets the same limits."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "fuzz_parsers", ROOT / "benchmarks" / "fuzz_parsers.py"
)
assert _spec is not None and _spec.loader is not None
fuzz_parsers: Any = importlib.util.module_from_spec(_spec)
sys.modules["fuzz_parsers"] = fuzz_parsers  # its dataclasses look their module up
_spec.loader.exec_module(fuzz_parsers)

HOSTILE = {
    "empty": "",
    "truncated": '{"timestamp": 0, "input_tok',
    "deeply nested": "[" * 100_000,
    "deep YAML": "a: " + "[" * 100_000,
    "huge number": '{"timestamp": 0, "input_tokens": ' + "9" * 401 + "}",
    "NaN": '{"timestamp": NaN, "input_tokens": 5}',
    "infinity": '{"timestamp": 1e999}\na: .inf',
    "lone surrogate": '{"model": "\\ud800"}',
    "wrong types": "[1, 2, 3]",
    "Rich markup": "[/x] [bold]",
}


@pytest.mark.parametrize("case", HOSTILE)
@pytest.mark.parametrize("parser", fuzz_parsers.parsers(), ids=lambda p: p.name)
def test_a_parser_accepts_or_refuses_in_one_line(parser: Any, case: str) -> None:
    try:
        parser.run(HOSTILE[case])
    except parser.refuses as e:
        assert str(e) and "\n" not in str(e).strip(), str(e)


# Where a raw decoder or file read is right, and why.
ALLOWED = {
    "collector/agent/trtllm.py": "a scraped response, bounded by the fetch",
    "collector/agent/fetch.py": "a Prometheus API response, bounded by the fetch",
    "collector/agent/spool.py": "the agent's own spool files",
    "collector/agent/dcgm.py": "a file shipped with the package",
    "collector/store/_fleet.py": "the store's own JSON",
    "collector/bench/client.py": "a server's response, read up to 1 MiB",
    "collector/bench/sse.py": "a server's stream, bounded by the client",
    "collector/metrics/_client.py": "a metrics API response, read up to its byte cap",
    "tuner/tune/study.py": "the store's own study spec",
    "tuner/tune/worker.py": "the study's own scratch files",
    "tuner/tune/backends/launch.py": "the trial's own logs and option files",
    "tuner/tune/backends/server_config.py": "/proc and the engine's own responses",
    "tuner/sim/catalog/_loader.py": "catalogs shipped with the package",
    "tuner/sim/cost_coeffs.py": "coefficients shipped with the package",
    "tuner/emulate/timings.py": "the emulator's own log",
    "tuner/emulate/app.py": "the emulator's request bodies (tests/fuzz covers them)",
    "tuner/emulate/sglang_api.py": "the emulator's request bodies (tests/fuzz covers them)",
    "tuner/sim/calibration/fit.py": "a maintainer's fitting script output",
    "tuner/sim/calibration/_report.py": "a maintainer's report into the docs",
    "tuner/sim/calibration/_data.py": "the profiling data shipped with the repository",
    "tuner/tiny_model/_tokenizer.py": "a corpus shipped with the package",
    "tuner/fleet/prices.py": "prices shipped with the package",
    "tuner/fleet/proxy.py": "request bodies: to go through collector/jsonfile.read_json",
}
RAW = re.compile(
    r"json\.loads?\(|yaml\.(safe_)?load|(?<!textfile)\.read_text\(|\.read_bytes\(|\.write_text\(|"
    r"\.write_bytes\(|\.open\(\"[wa]|\.json\(\)"
)


def test_no_module_reads_or_writes_user_files_around_the_bounded_helpers() -> None:
    own = {"collector/jsonfile.py", "collector/yamlfile.py", "collector/textfile.py"}
    found = {
        str(p.relative_to(ROOT))
        for layer in ("collector", "tuner", "ui")
        for p in (ROOT / layer).rglob("*.py")
        if RAW.search(p.read_text(encoding="utf-8"))
    }
    assert found - own - set(ALLOWED) == set(), "read and write through collector/textfile.py"
