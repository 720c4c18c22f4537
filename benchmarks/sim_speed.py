"""How fast the simulator replays whole traces, side by side with a peer checkout and Vidur.

Each case runs ``slotune sim`` as a child process (imports, simulation, summary and report
included) for this tree and, with ``--peer DIR``, for another checkout of slotune run from
its own folders on the same interpreter, alternating so both see the same machine load. It
prints each run's CPU seconds (user + system of the child, best of ``--repeat``), requests
per CPU-second and the ratio. Cases: ``azure-conv``, ``azure-code``,
``mooncake-conversation`` and a saturated queue (every request of an azure-conv-like
workload arriving at once, so the engine stays full as under a closed loop).

Vidur (PyPI ``vidur``) is run with ``--vidur PYTHON`` on the same number of requests when
its interpreter is given; its figure is otherwise Vidur's published one (10,000 requests in
16.7 s on 2 vCPUs). Targets: mooncake-conversation >= 3.5x and azure-conv >= 1.9x fewer
CPU-s than ``ead60ec``, >= 40x Vidur's requests per CPU-second. Prints figures; asserts
nothing.

    .venv/bin/python benchmarks/sim_speed.py [--peer /tmp/ead60ec] [--repeat 1]
        [--case azure-conv ...] [--engine sglang] [--vidur /work/venvs/vidur/bin/python]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

VIDUR_REQUESTS = 10_000
VIDUR_SECONDS = 16.7
LAYERS = ("collector", "tuner", "ui", "migrations")
CLI = "from slotune.ui.cli import main; main()"
MODEL = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm")
CASES: dict[str, tuple[tuple[str, ...], int]] = {
    "azure-conv": (("--workload", "azure-conv"), 19_366),
    "azure-code": (("--workload", "azure-code"), 8_819),
    "mooncake-conversation": (("--workload", "mooncake-conversation"), 12_031),
    "saturated-5k": (
        (
            "--input-len",
            "empirical:azure-conv",
            "--output-len",
            "empirical:azure-conv",
            "--num-requests",
            "5000",
        ),
        5_000,
    ),
}


def cpu_s(cmd: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one child process run to the end."""
    with subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL) as proc:
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited with {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def namespace_for(checkout: Path, into: Path) -> Path:
    """A folder whose ``slotune/`` links to a checkout's layers, for PYTHONPATH."""
    pkg = into / "slotune"
    pkg.mkdir(parents=True)
    for layer in LAYERS:
        (pkg / layer).symlink_to(checkout.resolve() / layer)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer", type=Path, help="another slotune checkout to compare with")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--case", action="append", choices=list(CASES))
    parser.add_argument("--vidur", help="python of a venv with vidur installed")
    parser.add_argument("--engine", default="vllm", help="the simulated engine's defaults")
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this tree": namespace_for(here, Path(tmp) / "here")}
        if args.peer is not None:
            trees[f"peer {args.peer}"] = namespace_for(args.peer, Path(tmp) / "peer")
        for case in args.case or list(CASES):
            _run_case(case, trees, args.repeat, args.engine)
    _report_vidur(args.vidur)


def _run_case(case: str, trees: dict[str, Path], repeat: int, engine: str) -> None:
    flags, num_requests = CASES[case]
    best: dict[str, float] = {}
    for _ in range(repeat):
        for name, path in trees.items():
            env = os.environ | {"PYTHONPATH": str(path)}
            cmd = [sys.executable, "-c", CLI, "sim", *MODEL, "--engine", engine, *flags, "--json"]
            best[name] = min(best.get(name, float("inf")), cpu_s(cmd, env))
    print(f"{case} ({num_requests:,} requests, best of {repeat}):")
    for name, seconds in best.items():
        print(f"  {name:40s} {seconds:6.2f} CPU-s  {num_requests / seconds:8,.0f} requests/CPU-s")
    names = list(best)
    if len(names) == 2:
        print(f"  {names[1]} / this tree: {best[names[1]] / best[names[0]]:.2f}x the CPU-s")
    vidur_rps = VIDUR_REQUESTS / VIDUR_SECONDS
    print(
        f"  vs Vidur's published {vidur_rps:,.0f} requests/s: "
        f"{num_requests / best[names[0]] / vidur_rps:.1f}x"
    )


def _report_vidur(python: str | None) -> None:
    if python is None:
        print(
            f"Vidur: published {VIDUR_REQUESTS:,} requests in {VIDUR_SECONDS} s on 2 vCPUs "
            "(pass --vidur PYTHON to run it here)"
        )
        return
    cmd = [
        python,
        "-m",
        "vidur.main",
        "--synthetic_request_generator_config_num_requests",
        str(VIDUR_REQUESTS),
    ]
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile("w+") as err:
        with subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.DEVNULL, stderr=err) as proc:
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        last = (err.read().strip().splitlines() or ["no output"])[-1]
    if proc.returncode:
        print(f"Vidur did not run here ({python}): {last}")
        return
    seconds = usage.ru_utime + usage.ru_stime
    print(
        f"Vidur here: {VIDUR_REQUESTS:,} synthetic requests in {seconds:.2f} CPU-s = "
        f"{VIDUR_REQUESTS / seconds:,.0f} requests/CPU-s"
    )


if __name__ == "__main__":
    main()
