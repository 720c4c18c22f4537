"""The emulated SGLang's ``/metrics`` against SGLang 0.5.23's own exposition.

tests/data/sglang/metrics-0.5.23.txt is what SGLang 0.5.23's metric collectors export for a
default single-GPU server after two requests, one streamed (tests/data/sglang/SOURCES.md).
The emulated SGLang serves the same after the same traffic: every family, its type, its
label names, the values of its enumerated labels and its bucket bounds.

Families SGLang creates only at their first event are absent from the dump and checked
against SGLang's definitions instead (:func:`test_event_families_appear_with_sglangs_labels`).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from emulate_helpers import RunningEmulator
from parity_shapes import FamilyShape, family_shapes, shape_diff

DUMP = Path(__file__).resolve().parents[2] / "data" / "sglang" / "metrics-0.5.23.txt"
# Labels whose values name the server or its process, not the metric's meaning.
_SERVER_LABELS = {"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "pid"}
_PROMPT = " ".join(f"word{i}" for i in range(40))  # long enough for a cached KV block


def sglang_shapes(text: str) -> dict[str, FamilyShape]:
    return family_shapes(text, "sglang:", _SERVER_LABELS)


def _traffic(client: httpx.Client, url: str) -> None:
    """A request of each kind the dump saw: plain, streamed, and a cached prefix."""
    body = {"prompt": _PROMPT, "max_tokens": 4}
    client.post(f"{url}/v1/completions", json=body).raise_for_status()
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}
    with client.stream("POST", f"{url}/v1/chat/completions", json=chat) as response:
        response.raise_for_status()
        response.read()
    with client.stream("POST", f"{url}/v1/completions", json={**body, "stream": True}) as response:
        response.raise_for_status()
        response.read()


def test_emulator_serves_the_families_of_sglang(sglang_emulator: RunningEmulator) -> None:
    url = sglang_emulator.url
    with httpx.Client(timeout=30) as client:
        _traffic(client, url)
        emulated = sglang_shapes(client.get(f"{url}/metrics").text)
    assert shape_diff(sglang_shapes(DUMP.read_text(encoding="utf-8")), emulated) == []


def test_event_families_appear_with_sglangs_labels(sglang_emulator: RunningEmulator) -> None:
    # SGLang counts an abort in num_aborted_requests_total (tokenizer labels) and nowhere else.
    url = sglang_emulator.url
    with httpx.Client(timeout=30) as client:
        body = {"prompt": _PROMPT, "max_tokens": 2000, "stream": True}
        with client.stream("POST", f"{url}/v1/completions", json=body) as response:
            next(response.iter_lines())  # the first token, then the client goes away
        shapes: dict[str, FamilyShape] = {}
        # The server sees the disconnect at its next write, which a loaded machine delays:
        # wait for it up to a deadline, not a number of scrapes.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            shapes = sglang_shapes(client.get(f"{url}/metrics").text)
            if "sglang:num_aborted_requests" in shapes:
                break
            time.sleep(0.05)
    aborted = shapes["sglang:num_aborted_requests"]
    assert (aborted.type, aborted.label_names) == ("counter", {"model_name", "engine_type"})
    assert "sglang:num_requests" not in shapes


# SGLang's documentation example (docs/references/production_metrics.md), a scrape of an
# early release, kept with the agent's test data (tests/collector/agent/data/NOTICE.md).
DOC_SCRAPE = DUMP.parents[2] / "collector" / "agent" / "data" / "sglang_production_metrics_doc.prom"
# What the current release did with the families of that scrape it no longer serves.
_GONE_SINCE_THE_DOC = {
    # split into sglang:inter_token_latency_seconds (every token gap) and
    # sglang:request_time_per_output_token_seconds (one TPOT per request)
    "sglang:time_per_output_token_seconds",
}


def test_families_of_sglangs_documented_scrape_keep_type_and_labels(
    sglang_emulator: RunningEmulator,
) -> None:
    url = sglang_emulator.url
    with httpx.Client(timeout=30) as client:
        _traffic(client, url)
        emulated = sglang_shapes(client.get(f"{url}/metrics").text)
    documented = sglang_shapes(DOC_SCRAPE.read_text(encoding="utf-8"))
    kept = set(documented) - _GONE_SINCE_THE_DOC
    assert kept <= set(emulated)
    assert not _GONE_SINCE_THE_DOC & set(emulated)
    for name in kept:  # later releases added labels (engine_type, ranks, is_streaming)
        assert emulated[name].type == documented[name].type, name
        assert documented[name].label_names <= emulated[name].label_names, name
