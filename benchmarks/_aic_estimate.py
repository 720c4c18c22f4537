"""AIConfigurator's aggregated-serving estimate of each row read on stdin, as JSON lines.

AIConfigurator (NVIDIA, Apache-2.0, https://github.com/ai-dynamo/aiconfigurator) estimates
TTFT and TPOT from kernel timings measured on each GPU. It pins its own dependencies, so it
lives in a virtual environment of its own, and this script is run by that environment's
Python, never imported by slotune (it imports only the standard library and AIConfigurator).
``_aic.py`` runs it once for all rows of a benchmark:

    python3 -m venv .venv-aic && .venv-aic/bin/pip install aiconfigurator
    .venv-aic/bin/python benchmarks/_aic_estimate.py < rows.jsonl > estimates.jsonl

Each input line: ``id``, ``backend`` (vllm, sglang, trtllm), ``model_path`` (Hugging Face
id), ``precision`` (bf16 or fp8, the weights and GEMMs; empty means bf16), ``isl``, ``osl``,
``batch_size`` (requests kept in flight), ``tp_size`` and optionally ``system``
(AIConfigurator's GPU name, ``h100_sxm`` by default). Each output line: ``id``,
``aic_ttft_ms``, ``aic_tpot_ms``, the ``aic_backend_version`` and ``aic_model_path`` the
estimate used and ``aic_warning`` (AIConfigurator's KV-cache warning, or null); or ``id`` and
``error``, the reason there is no estimate. AIConfigurator's own log goes to stderr.

The estimate is ``aiconfigurator.cli.api.cli_estimate(mode="agg")``, as AIConfigurator checks
itself against its silicon measurements, with each backend's default database version: the
newest that AIConfigurator can query, resolved once per system and backend.
"""

from __future__ import annotations

import json
import sys
from contextlib import redirect_stdout
from functools import cache
from typing import Any, TextIO

from aiconfigurator.cli.api import cli_estimate
from aiconfigurator.sdk.perf_database import get_latest_database_version

# Checkpoints of one architecture: AIConfigurator reads a model's config.json from its bundled
# cache or from Hugging Face, and its cache names these under their original ids.
SAME_ARCHITECTURE = {
    "meta-llama/Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
}
GEMM_QUANT_MODES = {"": "bfloat16", "bf16": "bfloat16", "fp8": "fp8"}


@cache
def _database_version(system: str, backend: str) -> str:
    version = get_latest_database_version(system=system, backend=backend)
    if version is None:
        raise ValueError(f"AIConfigurator has no {backend} database for {system}")
    return str(version)


def estimate(row: dict[str, Any]) -> dict[str, Any]:
    """One row's estimate, or the reason there is none."""
    precision = str(row["precision"]).lower()
    if precision not in GEMM_QUANT_MODES:
        raise ValueError(f"precision {row['precision']!r} is not bridged (bf16 or fp8)")
    system = str(row.get("system") or "h100_sxm")
    model_path = SAME_ARCHITECTURE.get(row["model_path"], row["model_path"])
    result = cli_estimate(
        model_path,
        system,
        mode="agg",
        backend_name=row["backend"],
        backend_version=_database_version(system, row["backend"]),
        isl=int(row["isl"]),
        osl=int(row["osl"]),
        batch_size=int(row["batch_size"]),
        tp_size=int(row["tp_size"]),
        gemm_quant_mode=GEMM_QUANT_MODES[precision],
    )
    return {
        "aic_ttft_ms": result.ttft,
        "aic_tpot_ms": result.tpot,
        "aic_backend_version": result.backend_version,
        "aic_model_path": model_path,
        "aic_warning": result.kv_cache_warning,
    }


def main(lines: TextIO, out: TextIO) -> None:
    for line in lines:
        if not line.strip():
            continue
        row: dict[str, Any] = {}
        try:
            row = json.loads(line)
            # AIConfigurator prints its own progress: keep stdout for the JSON lines.
            with redirect_stdout(sys.stderr):
                answer = estimate(row)
        except Exception as error:  # one row's failure is that row's answer
            first_line = next(iter(str(error).strip().splitlines()), "")
            answer = {"error": f"{type(error).__name__}: {first_line}"}
        print(json.dumps({"id": row.get("id"), **answer}), file=out, flush=True)


if __name__ == "__main__":
    main(sys.stdin, sys.stdout)
