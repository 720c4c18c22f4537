"""``slotune sim calibrate --target --window`` on a window of emulated-engine traffic.

Starts ``slotune emulate`` (vLLM face, llama-3.1-8b on an H100, real time) whose GPU carries
step terms the calibration does not know (an overlay in ``SLOTUNE_CATALOG``: 2 ms per step,
20 us per prompt token, 100 us per decoding sequence), scrapes it every 5 s with
``slotune agent`` into a fresh SQLite store while ``slotune bench`` sends ``--requests``
requests at ``--rate``, then runs ``sim calibrate --target NAME --window`` on the bench's
window without the overlay and prints the judged draw's mean TTFT / TPOT errors before and
after, next to the client's own means. The host's CPU lag is part of what the engine served,
so on a busy machine the fit absorbs it. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/sim_calibration_window.py [--rate 2] [--requests 240]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from slotune.tuner.sim.catalog import StepTerms, get_gpu, gpu_entry
from slotune.tuner.tune.backends.launch import free_port

SLOTUNE = str(Path(sys.executable).parent / "slotune")
MODEL, GPU, MAX_MODEL_LEN = "llama-3.1-8b", "h100-sxm", "16384"
HIDDEN = StepTerms(step_s=2e-3, prefill_token_s=20e-6, decode_seq_s=1e-4)
SCRAPE_S = 5


def hidden_overlay(path: Path) -> None:
    gpu = get_gpu(GPU)
    efficiency = dataclasses.replace(gpu.efficiency, step_terms=HIDDEN)
    entry = gpu_entry(dataclasses.replace(gpu, efficiency=efficiency))
    path.write_text(yaml.safe_dump({"gpus": [entry]}), encoding="utf-8")


def wait_ready(url: str) -> None:
    for _ in range(120):
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the emulator at {url} did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=2.0)
    parser.add_argument("--requests", type=int, default=240)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="calib-window-"))
    db = f"sqlite:///{work / 'store.db'}"
    hidden_overlay(work / "hidden.yaml")
    subprocess.run([SLOTUNE, "--db", db, "db", "upgrade"], check=True, capture_output=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    emulate = [SLOTUNE, "emulate", "--model", MODEL, "--gpu", GPU, "--port", str(port)]
    emulator = subprocess.Popen(
        [*emulate, "--max-model-len", MAX_MODEL_LEN],
        env=os.environ | {"SLOTUNE_CATALOG": str(work / "hidden.yaml")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    agent = None
    try:
        wait_ready(url)
        agent = subprocess.Popen(
            [
                SLOTUNE,
                "--db",
                db,
                "agent",
                "--scrape",
                f"vllm={url}/metrics",
                "--interval",
                f"{SCRAPE_S}s",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(SCRAPE_S + 1)
        start = time.time()
        bench = subprocess.run(
            [
                *(SLOTUNE, "--db", db, "bench", "--url", url, "--rate", str(args.rate)),
                *("--input-len", "lognormal:6.5,0.8", "--output-len", "lognormal:5.0,0.7"),
                *("--num-requests", str(args.requests), "--no-store", "--json"),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        time.sleep(2 * SCRAPE_S + 1)
        end = time.time()
    finally:
        for proc in (agent, emulator):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=60)
    targets = subprocess.run(
        [SLOTUNE, "--db", db, "targets", "list", "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    target = json.loads(targets.stdout)[0]["name"]
    calibrate = subprocess.run(
        [
            *(SLOTUNE, "--db", db, "sim", "--model", MODEL, "--gpu", GPU, "calibrate"),
            *("--max-model-len", MAX_MODEL_LEN, "--target", target),
            *("--window", f"{end - start:.0f}s", "--end", f"{end:.0f}", "--json"),
        ],
        capture_output=True,
        text=True,
    )
    if calibrate.returncode not in (0, 3):
        raise SystemExit(calibrate.stderr)
    report = json.loads(calibrate.stdout)
    client = json.loads(bench.stdout)["summary"]
    window = report["window"]
    print(
        f"window: {window['num_requests']} requests, {window['rate_per_s']:.2f}/s; mean TTFT "
        f"{window['mean_ttft_s'] * 1e3:.1f} ms, TPOT {window['mean_tpot_s'] * 1e3:.2f} ms "
        f"(client: {client['ttft_ms']['mean']:.1f} ms, {client['tpot_ms']['mean']:.2f} ms)"
    )
    for when in ("before", "after"):
        e = report[f"error_{when}"]["judged"]
        print(
            f"  judged draw, {when:<6}: TTFT {e['ttft']:+6.1%}  TPOT {e['tpot']:+6.1%}  "
            f"score {e['score']:.2f}"
        )
    print(
        f"  written (exit 0): {report['beats_prior']}; fitted terms {report['step_terms']['terms']}"
    )


if __name__ == "__main__":
    main()
