"""``slotune bench`` against real vLLM, next to vLLM's own histograms over exactly the measured
requests (the growth of their ``_sum`` and ``_count`` between a scrape before and after).

Tolerance, and why (docs/real-vllm.md has the measured table):

- Counts are exact: vLLM observed one TTFT, TPOT and E2E per measured request, as many as the
  client timed, and one ITL per gap between two output tokens. The client times no more gaps
  than that (fewer when two tokens arrive in one chunk).
- TTFT and E2E: the client's interval contains vLLM's. vLLM starts its clock when the API
  server has read and tokenized the request, and stops it when its front end processes the
  engine's output, before detokenizing and writing the SSE event; the client starts before
  sending and stops when the event arrives. So the client's mean is never below vLLM's; by how
  much it is above is the HTTP and streaming overhead, which depends on the machine's load and
  is reported, not asserted.
- ITL and TPOT: both are the decode interval (last token - first token) over the gaps, on
  each side's clock. They differ by how much later the last token reached the client than the
  first, relative to the engine: a few milliseconds per request spread over every gap. The
  means agree within 15 %.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _tools import SLOTUNE
from real_vllm_helpers import delta, read_metrics

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

NUM_REQUESTS = 20
OUTPUT_TOKENS = 32
FAMILIES = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}
DECODE_TOLERANCE = 0.15


def test_bench_figures_sit_next_to_vllms_histograms(
    real_vllm: str, tiny_model: Path, tmp_path: Path
) -> None:
    before = read_metrics(real_vllm)
    # fmt: off
    out = subprocess.run(
        [SLOTUNE, "bench", "--url", real_vllm, "--input-len", "64",
         "--output-len", str(OUTPUT_TOKENS), "--rate", "4", "--num-requests", str(NUM_REQUESTS),
         "--tokenizer", str(tiny_model), "--seed", "1", "--no-store", "--json"],
        capture_output=True, text=True, timeout=600, check=True,
    )
    # fmt: on
    after = read_metrics(real_vllm)
    summary = json.loads(out.stdout)["summary"]
    assert summary["num_completed"] == NUM_REQUESTS and summary["num_errors"] == 0

    table = {}
    for metric, family in FAMILIES.items():
        count = delta(after, before, f"{family}_count")
        vllm_ms = 1000.0 * delta(after, before, f"{family}_sum") / count
        client = summary[f"{metric}_ms"]
        table[metric] = (client["mean"], vllm_ms, count, client["count"])
    detail = {m: f"client {c:.2f} ms, vLLM {v:.2f} ms" for m, (c, v, _, _) in table.items()}

    for metric in ("ttft", "tpot", "e2e"):
        assert table[metric][2] == table[metric][3] == NUM_REQUESTS, metric
    assert table["itl"][2] == NUM_REQUESTS * (OUTPUT_TOKENS - 1) >= table["itl"][3]
    assert delta(after, before, "vllm:generation_tokens_total") == NUM_REQUESTS * OUTPUT_TOKENS
    for metric in ("ttft", "e2e"):
        client_ms, vllm_ms, _, _ = table[metric]
        assert client_ms >= vllm_ms, detail
    for metric in ("itl", "tpot"):
        client_ms, vllm_ms, _, _ = table[metric]
        assert client_ms == pytest.approx(vllm_ms, rel=DECODE_TOLERANCE), detail
