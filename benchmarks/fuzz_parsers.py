"""Every parser of untrusted input fed many generated inputs: how many it accepts, refuses
with its documented error, and how many crash (any other exception).

Inputs are mutations of real files (the repository's examples, Sloth's and Pyrra's examples,
vLLM's /metrics, Kineto and ROCm-style traces, Azure and Mooncake trace lines): tokens swapped
for hostile ones (NaN, 1e999, 5,000-digit integers, ids past int64, lone surrogates, YAML tags
with bad values, nesting past the stack, control characters), slices cut, repeated or moved,
noise and lone surrogates. File parsers get the input as a file. The generator is seeded, so a
run is reproducible; the first crashes of each parser are printed with their input.

    .venv/bin/python benchmarks/fuzz_parsers.py                  # SLOTUNE_FUZZ_EXAMPLES or 10**6 each
    .venv/bin/python benchmarks/fuzz_parsers.py --count 20000 --parser promtext

The Hypothesis suite (tests/fuzz, the same count from SLOTUNE_FUZZ_EXAMPLES) searches
property by property; this script is the bulk run with counts to report.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slotune.collector.agent.promtext import parse_text
from slotune.collector.agent.targets import load_targets_file
from slotune.collector.alerts.history import parse_history
from slotune.collector.alerts.rules import parse_rules_yaml
from slotune.collector.alerts.slo_files import load_slo_documents
from slotune.collector.bench.persist import resolve_run
from slotune.collector.errors import ConfigError, SourceError
from slotune.collector.jsonfile import read_json
from slotune.collector.observed import read_observed
from slotune.collector.silicon import read_silicon
from slotune.collector.slo import parse_slo
from slotune.collector.workload.traces import load_trace as load_workload_trace
from slotune.tuner.diagnose._trace import load_trace as load_profiler_trace
from slotune.tuner.fleet.estimator import OutputLengthEstimator
from slotune.tuner.fleet.route_config import parse_route_config
from slotune.tuner.fleet.route_request import BadRequest, request_info
from slotune.tuner.tune.space import Engine, space_overrides

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
HOSTILE = [
    "NaN", "nan", "Infinity", "-Infinity", "+Inf", "1e999", "-1e999", "9" * 5000, "-1", "0",
    "0x10", "1.5", "5e-324", "18446744073709551616", "9223372036854775808", "true", "null",
    "~", "[]", "{}", "[" * 1500, "{" * 1500, "- " * 500, '"\\ud800"', "\\udfff", "\ud800",
    "!!int 0xzz", "!!float abc", "!!timestamp notatime", "!!binary zz", "&a [*a]", "<<: *a",
    "? [a]: 1", "%YAML 1.1\n---", "---\n", "'", '"', "\\", "\n", "\r\n", "\t", "\x00", "\x1b[31m",
    "é", "\U0001f642", ":", "=", ",", "{le=\"abc\"}", " " * 3000, "a" * 70_000, "# EOF",
    "[x](http://e.x)", "${x}", "{{.window}}", "%s%n",
]  # fmt: skip
_TOKEN = re.compile(r"[A-Za-z0-9_.:+-]+|\S")


@dataclass
class Tally:
    """What one parser did with its inputs."""

    inputs: int = 0
    accepted: int = 0
    refused: int = 0
    crashed: int = 0
    slowest_s: float = 0.0
    slowest_input: str = ""
    crashes: dict[str, str] = field(default_factory=dict)  # first input of each kind of crash


@dataclass(frozen=True)
class Parser:
    name: str
    seeds: list[str]
    run: Callable[[str], Any]  # parses one input; raises ``refuses`` to refuse it
    refuses: tuple[type[BaseException], ...] = (ConfigError,)


def _read(*paths: Path) -> list[str]:
    return [p.read_text(encoding="utf-8") for p in paths]


def _file_parser(load: Callable[[Path], Any], suffix: str) -> Callable[[str], Any]:
    """A parser of files: each input is written to one scratch file, bytes as they come."""
    path = Path(tempfile.mkdtemp(prefix="slotune-fuzz-")) / f"input{suffix}"

    def run(text: str) -> Any:
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        return load(path)

    return run


def _kineto(rocm: bool) -> str:
    q = (lambda v: f'"{v}"') if rocm else str
    runtime = "hip_runtime" if rocm else "cuda_runtime"
    launch = "hipLaunchKernel" if rocm else "cudaLaunchKernel"
    events = [
        f'{{"ph":"X","cat":"{runtime}","name":"{launch}","pid":1,"tid":1,"ts":10,"dur":2,'
        f'"args":{{"correlation":{q(1)}}}}}',
        f'{{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":15,"dur":40,'
        f'"args":{{"correlation":{q(1)},"device":{q(0)},"stream":{q(7)}}}}}',
        f'{{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,'
        f'"tid":7,"ts":60,"dur":5,"args":{{"correlation":{q(2)},"bytes":{q(9216)}}}}}',
        '{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":5,'
        '"dur":80,"args":{}}',
    ]
    return (
        '{"schemaVersion":1,"distributedInfo":{"rank":0,"world_size":1},"traceEvents":[\n'
        + ",\n".join(events)
        + "\n]}"
    )


def _route_body(text: str) -> Any:
    """What ``slotune route`` does with a request body before it routes it: decode it with
    the bounded decoder, then read the routing fields."""
    body = read_json(text, source="request body", error=BadRequest)
    if not isinstance(body, dict):
        raise BadRequest("request body: must be a JSON object")
    return request_info(
        "r", body, {}, default_model="m", block_size=16, estimator=OutputLengthEstimator()
    )


def parsers() -> list[Parser]:
    vllm = (DATA / "vllm" / "metrics-0.32.0.txt").read_text(encoding="utf-8")
    vllm_lines = vllm.splitlines()
    slo_files = [
        *_read(ROOT / "examples" / "slos.yaml", ROOT / "examples" / "openslo.yaml"),
        *_read(DATA / "sloth" / "getting-started.yml", *sorted((DATA / "pyrra").glob("*.yaml"))),
    ]
    canonical = "\n".join(
        json.dumps(
            {"timestamp": t, "input_tokens": 100 + t, "output_tokens": 20, "hash_ids": [1, 2]}
        )
        for t in range(4)
    )
    mooncake = '{"timestamp": 0, "input_length": 600, "output_length": 20, "hash_ids": [1, 2]}'
    azure = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
    history = (
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m"} 3 1700000000000\n'
        'vllm:num_requests_running{model_name="m"} 4 1700000005000\n'
    )
    openmetrics = history.replace("000000 ", "000 ").replace("005000", "005") + "# EOF\n"
    targets = (
        "interval: 5s\nlabels: {pool: chat}\ntargets:\n"
        "  - kind: vllm\n    url: http://127.0.0.1:8000\n    labels: {gpu: h100}\n"
        "  - kind: dcgm\n    url: http://127.0.0.1:9400/metrics\n    interval: 10s\n"
    )
    space = "max_num_seqs: [64, 128, 256]\nenable_chunked_prefill: [true, false]\n"
    measured = "\n".join(
        json.dumps(
            {"timestamp": t, "input_tokens": 812, "output_tokens": 190, "ttft_ms": 41.2,
             "e2e_ms": 2210.5, "tpot_ms": 11.5, "hash_ids": [1, 2], "model": "m"}
        )
        for t in range(3)
    )  # fmt: skip
    bodies = [
        '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20, '
        '"stream": true}',
        '{"model": "m", "prompt": "Once upon a time", "max_tokens": 64, "user": "u1"}',
    ]
    silicon = _read(ROOT / "tests" / "data" / "silicon" / "silicon_h100_sample.csv")[0]
    result_file = json.dumps({"name": "run", "summary": {"num_requests": 3, "ttft_p99_ms": 41.0}})
    return [
        Parser(
            "promtext",
            ["\n".join(vllm_lines[i : i + 40]) for i in range(0, 400, 40)],
            lambda t: parse_text(t, content_type=""),
            (SourceError,),
        ),
        Parser(
            "slo shorthand",
            ["ttft:p99<=500ms", "itl:p95<50ms", "error_rate<=1%", "e2e:p90<=20s"],
            parse_slo,
        ),
        Parser("slo file (slotune, OpenSLO, Sloth, Pyrra)", slo_files, _file_parser(load_slo_documents, ".yaml")),
        Parser("alert rules", _read(ROOT / "examples" / "alerts.yaml"), lambda t: parse_rules_yaml(t)),
        Parser(
            "workload traces (JSONL, Azure CSV, Mooncake)",
            [canonical, mooncake, azure],
            _file_parser(load_workload_trace, ".txt"),
        ),
        Parser(
            "diagnose trace (Kineto, ROCm)",
            [_kineto(rocm=False), _kineto(rocm=True)],
            _file_parser(load_profiler_trace, ".json"),
        ),
        Parser("route config", _read(ROOT / "examples" / "fleet.yaml"), lambda t: parse_route_config(t)),
        Parser(
            "search space",
            [space],
            _file_parser(lambda p: space_overrides(Engine.VLLM, p, []), ".yaml"),
        ),
        Parser("targets file", [targets], _file_parser(lambda p: load_targets_file(p, node="n"), ".yaml")),
        Parser("OpenMetrics import", [history, openmetrics], lambda t: parse_history(t, "<fuzz>")),
        Parser("measured requests (sim calibrate --observed)", [measured], _file_parser(read_observed, ".jsonl")),
        Parser("route request body", bodies, _route_body),
        Parser("bench result file (bench compare)", [result_file], _file_parser(lambda p: resolve_run(None, str(p)), ".json")),
        Parser("silicon CSV (sim calibrate --silicon)", [silicon], _file_parser(read_silicon, ".csv")),
    ]  # fmt: skip


def mutate(seed: str, rng: random.Random) -> str:
    """One hostile variant of a seed text."""
    text = seed
    for _ in range(rng.choice((1, 1, 2, 3))):
        op = rng.randrange(8)
        n = len(text)
        i, j = sorted((rng.randrange(n + 1), rng.randrange(n + 1)))
        if op <= 1:  # replace one token by a hostile one
            tokens = list(_TOKEN.finditer(text))
            if tokens:
                m = rng.choice(tokens)
                text = text[: m.start()] + rng.choice(HOSTILE) + text[m.end() :]
        elif op == 2:
            text = text[:i] + rng.choice(HOSTILE) + text[i:]
        elif op == 3:
            text = text[:i] + text[j:]
        elif op == 4:
            text = text[:j] + text[i:j] * rng.randrange(1, 4) + text[j:]
        elif op == 5:
            text = text[:i]
        elif op == 6:  # noise, including code points that are not characters
            noise = "".join(
                chr(rng.choice((rng.randrange(32, 127), rng.randrange(0x110000))))
                for _ in range(rng.randrange(1, 12))
            )
            text = text[:i] + noise + text[i:]
        else:  # lone surrogates: not Unicode text, and not UTF-8 once written to a file
            text = (
                text[:i]
                + "".join(chr(0xDC80 + rng.randrange(128)) for _ in range(rng.randrange(1, 4)))
                + text[i:]
            )
    return text  # fmt: skip


def fuzz(parser: Parser, count: int, rng: random.Random) -> Tally:
    tally = Tally()
    for k in range(count):
        seed = parser.seeds[k % len(parser.seeds)]
        text = seed if k < len(parser.seeds) else mutate(seed, rng)
        tally.inputs += 1
        start = time.perf_counter()
        try:
            parser.run(text)
        except parser.refuses:
            tally.refused += 1
        except Exception as e:  # what the fuzzing is for: anything undocumented
            tally.crashed += 1
            kind = f"{type(e).__name__}: {str(e)[:100]}"
            tally.crashes.setdefault(kind, repr(text[:300]))
        else:
            tally.accepted += 1
        elapsed = time.perf_counter() - start
        if elapsed > tally.slowest_s:
            tally.slowest_s, tally.slowest_input = elapsed, repr(text[:200])
    return tally


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--count",
        type=int,
        default=int(os.environ.get("SLOTUNE_FUZZ_EXAMPLES", 10**6)),
        help="inputs per parser",
    )
    ap.add_argument(
        "--parser", action="append", help="only parsers whose name contains this (repeat)"
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()  # fmt: skip
    chosen = [p for p in parsers() if not args.parser or any(s in p.name for s in args.parser)]
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(
        f"{'parser':<44} {'inputs':>9} {'accepted':>9} {'refused':>9} {'crashed':>8} {'s':>7} {'slowest':>8}"
    )
    total_crashes = 0
    for parser in chosen:
        start = time.perf_counter()
        t = fuzz(parser, args.count, random.Random(f"{args.seed}:{parser.name}"))
        wall = time.perf_counter() - start
        total_crashes += t.crashed
        print(
            f"{parser.name:<44} {t.inputs:>9,} {t.accepted:>9,} {t.refused:>9,} {t.crashed:>8,} "
            f"{wall:>7.1f} {t.slowest_s:>7.3f}s",
            flush=True,
        )
        for kind, example in list(t.crashes.items())[:5]:
            print(f"    crash {kind}\n      input {example}")
        if t.slowest_s > 1.0:
            print(f"    slowest input ({t.slowest_s:.1f} s) {t.slowest_input}")
    sys.exit(1 if total_crashes else 0)


if __name__ == "__main__":
    main()
