"""slotune's cost model next to NVIDIA AIConfigurator's static estimate on H100 (TensorRT-LLM).

AIConfigurator (``pip install aiconfigurator``, in its own virtual environment) estimates a
static batch from measured TensorRT-LLM kernel data: TTFT (the batch's prompts in one
context phase) and TPOT (one generation step). For the same model, tensor-parallel size,
batch and lengths this prints slotune's prefill step of the whole batch and its decode step at
the mean context (prompt + half the output), with the decode step's split into compute,
memory, communication and host overhead, so a gap can be traced to a part of the cost model.
Skips (exit 0) when AIConfigurator is not installed. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/sim_vs_aiconfigurator.py [--aic /tmp/aic-venv/bin/aiconfigurator]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from slotune.tuner.engines.registry import adapter_for
from slotune.tuner.sim.catalog import get_gpu, get_model
from slotune.tuner.sim.cost import CostModel, StepShape

# (catalog model, AIConfigurator model path, tensor-parallel size)
MODELS = (
    ("llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B", 1),
    ("llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B", 2),
    ("llama-3.1-70b", "meta-llama/Meta-Llama-3.1-70B", 4),
)
BATCHES = (1, 8, 32, 128)
ISL, OSL = 1024, 128


def _aic(binary: str, model_path: str, tp: int, batch: int) -> tuple[float, float] | None:
    out = subprocess.run(
        [
            binary,
            "cli",
            "estimate",
            "--model-path",
            model_path,
            "--system",
            "h100_sxm",
            "--backend",
            "trtllm",
            "--estimate-mode",
            "static",
            "--batch-size",
            str(batch),
            "--isl",
            str(ISL),
            "--osl",
            str(OSL),
            "--tp-size",
            str(tp),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    ).stdout
    ttft = re.search(r"TTFT:\s+([\d.,]+) ms", out)
    tpot = re.search(r"TPOT:\s+([\d.,]+) ms", out)
    if ttft is None or tpot is None:
        return None
    return float(ttft.group(1).replace(",", "")), float(tpot.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--aic", default="/tmp/aic-venv/bin/aiconfigurator")
    args = parser.parse_args()
    binary = args.aic if Path(args.aic).is_file() else shutil.which("aiconfigurator")
    if binary is None:
        print("AIConfigurator not installed (pip install aiconfigurator in its own venv); skipped")
        sys.exit(0)
    gpu = get_gpu("h100-sxm")
    trtllm = adapter_for("trtllm")
    print(
        f"H100 SXM, TensorRT-LLM, ISL {ISL}, OSL {OSL}; AIConfigurator static estimate vs "
        "slotune's cost model (prefill = the whole batch in one step, decode = one step at "
        f"context {ISL + OSL // 2}); decode split = compute / memory / comm / overhead"
    )
    for model_id, path, tp in MODELS:
        cost = CostModel(
            get_model(model_id), gpu, tensor_parallel_size=tp, host_step_s=trtllm.host_step_s
        )
        for batch in BATCHES:
            aic = _aic(binary, path, tp, batch)
            tokens = batch * ISL
            prefill = cost.step_time(
                StepShape(
                    num_prefill_tokens=tokens,
                    prefill_attention_work=batch * ISL * ISL / 2,
                    num_prefill_seqs=batch,
                )
            )
            decode = cost.step_time(
                StepShape(num_decode_seqs=batch, decode_context_tokens=batch * (ISL + OSL // 2))
            )
            split = " / ".join(
                f"{1e3 * x:.2f}"
                for x in (
                    decode.compute_s,
                    decode.memory_s,
                    decode.communication_s,
                    decode.overhead_s,
                )
            )
            line = (
                f"{model_id} TP{tp} batch {batch:>3}: slotune prefill {1e3 * prefill.total_s:8.1f} ms, "
                f"decode {1e3 * decode.total_s:6.2f} ms ({split})"
            )
            if aic is not None:
                ttft, tpot = aic
                line += (
                    f" | AIC TTFT {ttft:8.1f} ms ({1e3 * prefill.total_s / ttft - 1:+.0%}), "
                    f"TPOT {tpot:6.2f} ms ({1e3 * decode.total_s / tpot - 1:+.0%})"
                )
            print(line, flush=True)


if __name__ == "__main__":
    main()
