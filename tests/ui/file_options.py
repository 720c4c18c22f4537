"""The registry of every file option of the command line, for the hostile-file contract suite.

Each entry is a command line with ``FILE`` where the path goes (inside an argument too, as in
``--pool a:1:m:g:FILE``), what the option does with the path and what it holds.
``test_file_contract.py`` finds every ``Path`` parameter of the Typer app and fails when one
is missing here, so an option is covered the day it is added; options typed ``str`` that name a
file (``diagnose workload TRACE``, ``bench compare RUN``, an engine flag) are listed too.
``OBSERVED`` and ``KINETO`` in a command line are replaced by a valid file of that kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Role(Enum):
    READ = "read"  # a file read
    READ_DIR = "read-dir"  # a directory whose files are read
    WRITE = "write"  # a file written
    WRITE_DIR = "write-dir"  # a directory files are written into


class Holds(Enum):
    """What a read file holds, which picks the hostile contents it is given."""

    JSONL = "jsonl"  # one JSON object a line: traces, measured requests
    JSON = "json"  # one JSON document: profiler traces, bench result files
    YAML = "yaml"
    TEXT = "text"  # Prometheus text, engine flags


@dataclass(frozen=True)
class FileOption:
    argv: tuple[str, ...]
    role: Role
    holds: Holds | None = None
    # The Typer parameter it is: (command path, parameter name); None for a str option.
    param: tuple[str, str] | None = None


SIM = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm")
POOL = "a:1:llama-3.1-8b:h100-sxm"
LENS = ("--input-len", "9", "--output-len", "9")
BENCH = ("bench", "--url", "http://127.0.0.1:9", "--rate", "1", "--num-requests", "1")
CALIBRATE = ("sim", "calibrate", *SIM, "--observed", "OBSERVED")
R, W = Role.READ, Role.WRITE

REGISTRY: dict[str, FileOption] = {
    "agent --targets": FileOption(
        ("agent", "--targets", "FILE", "--once"), R, Holds.YAML, ("agent", "targets")
    ),
    "agent --spool-dir": FileOption(
        ("agent", "--scrape", "nvml=fake", "--once", "--spool-dir", "FILE"),
        Role.WRITE_DIR,
        param=("agent", "spool_dir"),
    ),
    "alerts apply": FileOption(
        ("alerts", "apply", "FILE"), R, Holds.YAML, ("alerts apply", "file")
    ),
    "bench --trace": FileOption((*BENCH, "--trace", "FILE"), R, Holds.JSONL, ("bench", "trace")),
    "bench --tokenizer": FileOption(
        (*BENCH, *LENS, "--tokenizer", "FILE"), Role.READ_DIR, Holds.JSON, ("bench", "tokenizer")
    ),
    "bench --save": FileOption((*BENCH, "--save", "FILE"), W, param=("bench", "save")),
    "bench --requests-out": FileOption(
        (*BENCH, "--requests-out", "FILE"), W, param=("bench", "requests_out")
    ),
    "bench compare RUN": FileOption(("bench", "compare", "FILE", "1"), R, Holds.JSON),
    "diagnose trace": FileOption(
        ("diagnose", "trace", "FILE", "--no-store"), R, Holds.JSON, ("diagnose trace", "path")
    ),
    "diagnose trace --html": FileOption(
        ("diagnose", "trace", "KINETO", "--no-store", "--html", "FILE"),
        W,
        param=("diagnose trace", "html"),
    ),
    "diagnose sim --trace": FileOption(
        ("diagnose", "sim", "--trace", "FILE", "--no-store"),
        R,
        Holds.JSONL,
        ("diagnose sim", "trace"),
    ),
    "diagnose workload TRACE": FileOption(
        ("diagnose", "workload", "FILE", "--no-store"), R, Holds.JSONL
    ),
    "fleet simulate --trace": FileOption(
        ("fleet", "simulate", "--pool", POOL, "--trace", "FILE"),
        R,
        Holds.JSONL,
        ("fleet simulate", "trace"),
    ),
    "fleet simulate --route-config": FileOption(
        ("fleet", "simulate", "--pool", POOL, *LENS, "--route-config", "FILE"),
        R,
        Holds.YAML,
        ("fleet simulate", "route_config"),
    ),
    "fleet simulate --pool ...:CONFIG": FileOption(
        ("fleet", "simulate", "--pool", f"{POOL}:FILE", *LENS), R, Holds.TEXT
    ),
    "metrics import": FileOption(
        ("metrics", "import", "FILE", "--target", "t"), R, Holds.TEXT, ("metrics import", "file")
    ),
    "plan capacity --trace": FileOption(
        ("plan", "capacity", *SIM, "--trace", "FILE"), R, Holds.JSONL, ("plan capacity", "trace")
    ),
    "plan autoscale --trace": FileOption(
        ("plan", "autoscale", "--trace", "FILE"), R, Holds.JSONL, ("plan autoscale", "trace")
    ),
    "plan autoscale --route-config": FileOption(
        ("plan", "autoscale", *LENS, "--route-config", "FILE"),
        R,
        Holds.YAML,
        ("plan autoscale", "route_config"),
    ),
    "route --config": FileOption(("route", "--config", "FILE"), R, Holds.YAML, ("route", "config")),
    "sim --trace": FileOption(("sim", *SIM, "--trace", "FILE"), R, Holds.JSONL, ("sim", "trace")),
    "sim --catalog": FileOption(
        ("sim", *SIM, "--catalog", "FILE"), R, Holds.YAML, ("sim", "catalog")
    ),
    "sim --requests-out": FileOption(
        ("sim", *SIM, "--num-requests", "5", "--requests-out", "FILE"),
        W,
        param=("sim", "requests_out"),
    ),
    "sim --extra_llm_api_options": FileOption(
        ("sim", *SIM, *LENS, "--engine", "trtllm", "--extra_llm_api_options", "FILE"),
        R,
        Holds.YAML,
    ),
    "sim calibrate --observed": FileOption(
        ("sim", "calibrate", *SIM, "--observed", "FILE", "--out", "o.yaml"),
        R,
        Holds.JSONL,
        ("sim calibrate", "observed"),
    ),
    "sim calibrate --held-out": FileOption(
        (*CALIBRATE, "--held-out", "FILE", "--out", "o.yaml"),
        R,
        Holds.JSONL,
        ("sim calibrate", "held_out"),
    ),
    "sim calibrate --silicon": FileOption(
        ("sim", "calibrate", "--silicon", "FILE", "--out", "o.yaml"),
        R,
        Holds.TEXT,
        ("sim calibrate", "silicon"),
    ),
    "sim calibrate --catalog": FileOption(
        (*CALIBRATE, "--catalog", "FILE", "--out", "o.yaml"),
        R,
        Holds.YAML,
        ("sim calibrate", "catalog"),
    ),
    "sim calibrate --out": FileOption(
        (*CALIBRATE, "--out", "FILE"), W, param=("sim calibrate", "out")
    ),
    "slo apply": FileOption(("slo", "apply", "FILE"), R, Holds.YAML, ("slo apply", "file")),
    "slo export --output": FileOption(
        ("slo", "export", "--output", "FILE"), W, param=("slo export", "output")
    ),
    "tiny-model build": FileOption(
        ("tiny-model", "build", "FILE"), Role.WRITE_DIR, param=("tiny-model build", "out_dir")
    ),
    "tune --trace": FileOption(
        ("tune", "--slo", "ttft:p99<=1s", "--trace", "FILE"), R, Holds.JSONL, ("tune", "trace")
    ),
    "tune --space": FileOption(("tune", "--space", "FILE"), R, Holds.YAML, ("tune", "space")),
}
