"""The OpenAI-compatible routes: shapes, streaming, usage and vLLM-worded errors."""

from __future__ import annotations

from typing import Any

import httpx
from emulate_helpers import MAX_MODEL_LEN, MODEL, RunningEmulator, stream

from slotune.collector.workload.tokens import count_tokens

PROMPT = "Tell me, in a few words, how a KV cache works."


def test_completion_non_streaming_reports_usage_and_text(vllm_emulator: RunningEmulator) -> None:
    r = httpx.post(
        f"{vllm_emulator.url}/v1/completions",
        timeout=10,
        json={"model": MODEL, "prompt": PROMPT, "max_tokens": 5},
    )
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "text_completion"
    assert body["id"].startswith("cmpl-")
    assert body["model"] == MODEL
    assert body["usage"] == {
        "prompt_tokens": count_tokens(PROMPT),
        "completion_tokens": 5,
        "total_tokens": count_tokens(PROMPT) + 5,
        "prompt_tokens_details": None,
    }
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length"
    assert count_tokens(choice["text"]) == 5


def test_completion_stream_has_text_chunks_usage_chunk_and_done(
    vllm_emulator: RunningEmulator,
) -> None:
    with httpx.Client(timeout=10) as client:
        s = stream(
            client,
            f"{vllm_emulator.url}/v1/completions",
            {
                "model": MODEL,
                "prompt": PROMPT,
                "max_tokens": 4,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
    events = [e for _, e in s.events]
    assert events[-1] == "[DONE]"
    usage_chunk = events[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == 4
    assert usage_chunk["usage"]["prompt_tokens"] == count_tokens(PROMPT)
    token_chunks = events[:-2]
    assert len(token_chunks) == 4  # the fake core emits one token per step
    assert all(c["object"] == "text_completion" for c in token_chunks)
    assert [c["choices"][0]["finish_reason"] for c in token_chunks] == [None] * 3 + ["length"]
    assert sum(count_tokens(c["choices"][0]["text"]) for c in token_chunks) == 4


def test_chat_stream_sends_role_first_then_content_deltas(vllm_emulator: RunningEmulator) -> None:
    with httpx.Client(timeout=10) as client:
        s = stream(
            client,
            f"{vllm_emulator.url}/v1/chat/completions",
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": PROMPT}],
                "max_completion_tokens": 3,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
    events = [e for _, e in s.events]
    assert events[0]["object"] == "chat.completion.chunk"
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = [e for e in events[1:-2]]
    assert all("role" not in c["choices"][0]["delta"] for c in content)
    assert sum(count_tokens(c["choices"][0]["delta"]["content"]) for c in content) == 3
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["choices"] == [] and events[-2]["usage"]["completion_tokens"] == 3
    assert events[-1] == "[DONE]"


def test_chat_without_usage_option_sends_no_usage_chunk(vllm_emulator: RunningEmulator) -> None:
    with httpx.Client(timeout=10) as client:
        s = stream(
            client,
            f"{vllm_emulator.url}/v1/chat/completions",
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 2,
                "stream": True,
            },
        )
    assert all(e == "[DONE]" or e["choices"] for _, e in s.events)


def test_chat_non_streaming(vllm_emulator: RunningEmulator) -> None:
    r = httpx.post(
        f"{vllm_emulator.url}/v1/chat/completions",
        timeout=10,
        json={
            "model": MODEL,
            "max_tokens": 3,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
            ],
        },
    )
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert count_tokens(body["choices"][0]["message"]["content"]) == 3
    # "system: Be brief.\nuser: <prompt>" under the shared token rule
    assert body["usage"]["prompt_tokens"] == count_tokens(f"system: Be brief.\nuser: {PROMPT}")


def test_prompt_token_ids_and_equal_prompts_give_equal_outputs(
    vllm_emulator: RunningEmulator,
) -> None:
    url = f"{vllm_emulator.url}/v1/completions"
    a = httpx.post(url, timeout=10, json={"prompt": [5, 6, 7, 8], "max_tokens": 3}).json()
    b = httpx.post(url, timeout=10, json={"prompt_token_ids": [5, 6, 7, 8], "max_tokens": 3}).json()
    assert a["usage"]["prompt_tokens"] == 4
    assert a["choices"][0]["text"] == b["choices"][0]["text"]


def _error(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert set(body) == {"error"}
    return body["error"]


def test_unknown_model_is_404_like_vllm(vllm_emulator: RunningEmulator) -> None:
    r = httpx.post(
        f"{vllm_emulator.url}/v1/completions",
        timeout=10,
        json={"model": "other", "prompt": "x", "max_tokens": 1},
    )
    assert r.status_code == 404
    err = _error(r)
    assert err["message"] == "The model `other` does not exist."
    assert err["type"] == "NotFoundError" and err["code"] == 404


def test_too_long_prompt_is_400_with_vllm_wording(vllm_emulator: RunningEmulator) -> None:
    url = f"{vllm_emulator.url}/v1/completions"
    r = httpx.post(url, timeout=10, json={"prompt": "word " * MAX_MODEL_LEN, "max_tokens": 1})
    assert r.status_code == 400
    assert _error(r)["message"] == (
        f"This model's maximum context length is {MAX_MODEL_LEN} tokens. However, your request "
        f"has {MAX_MODEL_LEN} input tokens. Please reduce the length of the input messages."
    )
    r = httpx.post(url, timeout=10, json={"prompt": "word " * 100, "max_tokens": 200})
    assert r.status_code == 400
    assert "'max_tokens' or 'max_completion_tokens' is too large: 200." in _error(r)["message"]


def test_invalid_parameters_are_400_naming_the_field(vllm_emulator: RunningEmulator) -> None:
    url = f"{vllm_emulator.url}/v1/completions"
    cases = [
        ({"prompt": "x", "n": 2}, "n"),
        ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "x", "max_tokens": 2, "min_tokens": 3}, "min_tokens"),
        ({"prompt": "x", "stream_options": {"include_usage": True}}, "stream_options"),
        ({"prompt": ["a", "b"]}, "prompt"),
        ({}, "prompt"),
    ]
    for body, param in cases:
        r = httpx.post(url, timeout=10, json=body)
        assert r.status_code == 400, body
        err = _error(r)
        assert err["param"] == param and err["type"] == "BadRequestError", (body, err)
    r = httpx.post(url, timeout=10, content=b"{not json")
    assert r.status_code == 400


def test_default_max_tokens_fills_the_context(vllm_emulator: RunningEmulator) -> None:
    r = httpx.post(
        f"{vllm_emulator.url}/v1/completions",
        timeout=30,
        json={"prompt": "word " * (MAX_MODEL_LEN - 3)},
    )
    assert r.json()["usage"]["completion_tokens"] == 3


def test_models_health_version(vllm_emulator: RunningEmulator) -> None:
    assert httpx.get(f"{vllm_emulator.url}/health", timeout=10).status_code == 200
    assert "version" in httpx.get(f"{vllm_emulator.url}/version", timeout=10).json()
    models = httpx.get(f"{vllm_emulator.url}/v1/models", timeout=10).json()
    assert models["object"] == "list"
    card = models["data"][0]
    assert card["id"] == MODEL and card["object"] == "model"
    assert card["max_model_len"] == MAX_MODEL_LEN and card["owned_by"] == "vllm"
