"""The emulated SGLang's own routes, shaped as SGLang 0.5.23's http_server.py answers them."""

from __future__ import annotations

import json

import httpx
from emulate_helpers import MAX_MODEL_LEN, MODEL, RunningEmulator, make_emulator


def _sglang() -> RunningEmulator:
    return make_emulator("sglang").start()


def test_generate_answers_text_ids_and_meta_info() -> None:
    running = _sglang()
    try:
        body = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 5}}
        answer = httpx.post(f"{running.url}/generate", json=body, timeout=30).json()
    finally:
        running.close()
    meta = answer["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 5}
    assert (meta["prompt_tokens"], meta["completion_tokens"]) == (5, 5)
    assert len(answer["output_ids"]) == 5 and len(answer["text"].split()) == 5
    assert {"id", "cached_tokens", "e2e_latency", "weight_version"} <= set(meta)


def test_generate_streams_the_whole_text_so_far_then_done() -> None:
    running = _sglang()
    events: list[str] = []
    try:
        body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 4}, "stream": True}
        with httpx.stream("POST", f"{running.url}/generate", json=body, timeout=30) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            events = [line[len("data: ") :] for line in response.iter_lines() if line]
    finally:
        running.close()
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts == sorted(counts) and counts[-1] == 4
    assert [len(c["text"].split()) for c in chunks] == counts  # cumulative, not deltas
    assert [c["meta_info"]["finish_reason"] for c in chunks][-1] == {"type": "length", "length": 4}
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])


def test_generate_refuses_bad_input_in_sglangs_envelope() -> None:
    running = _sglang()
    try:
        too_long = {"input_ids": [1] * 10, "sampling_params": {"max_new_tokens": MAX_MODEL_LEN}}
        bad = [
            {"sampling_params": {"max_new_tokens": 4}},
            {"text": "hi", "sampling_params": {"max_new_tokens": "four"}},
            too_long,
        ]
        answers = [httpx.post(f"{running.url}/generate", json=b, timeout=30) for b in bad]
    finally:
        running.close()
    assert [a.status_code for a in answers] == [400, 400, 400]
    messages = [a.json()["error"]["message"] for a in answers]
    assert "text or input_ids" in messages[0]
    assert "max_new_tokens" in messages[1]
    assert "maximum context length" in messages[2]


def test_info_routes_and_their_deprecated_twins() -> None:
    running = _sglang()
    try:
        with httpx.Client(base_url=running.url, timeout=30) as client:
            answers = {
                path: client.get(path)
                for path in (
                    "/health",
                    "/health_generate",
                    "/ready",
                    "/model_info",
                    "/get_model_info",
                    "/server_info",
                    "/get_server_info",
                    "/v1/models",
                    f"/v1/models/{MODEL}",
                    "/v1/models/other",
                )
            }
    finally:
        running.close()
    assert {p: a.status_code for p, a in answers.items()} == {
        **{p: 200 for p in answers},
        "/v1/models/other": 404,
    }
    assert answers["/model_info"].json() == answers["/get_model_info"].json()
    assert answers["/model_info"].json()["served_model_name"] == MODEL
    info = answers["/server_info"].json()
    assert info["model_path"] == "org/test-model" and info["version"] == "0.5.23"
    assert info["max_total_num_tokens"] == 16000
    card = answers[f"/v1/models/{MODEL}"].json()
    assert answers["/v1/models"].json() == {"object": "list", "data": [card]}
    assert (card["root"], card["owned_by"], card["max_model_len"]) == (
        MODEL,
        "sglang",
        MAX_MODEL_LEN,
    )
    assert "permission" not in card
    assert answers["/v1/models/other"].json()["error"]["code"] == "model_not_found"


def test_http_metrics_count_requests_and_responses_by_route() -> None:
    running = _sglang()
    try:
        with httpx.Client(base_url=running.url, timeout=30) as client:
            for _ in range(3):
                client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2})
            client.get("/nowhere")
            text = client.get("/metrics").text
    finally:
        running.close()
    lines = set(text.splitlines())
    done = 'sglang:http_responses_total{endpoint="/v1/completions",method="POST",status_code="200"}'
    assert f"{done} 3.0" in lines
    assert 'sglang:http_requests_total{endpoint="/metrics",method="GET"} 1.0' in lines
    assert any(
        line.startswith("sglang:http_responses_total{") and '"404"' in line for line in lines
    )
