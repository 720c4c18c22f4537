"""The tiny model served by real vLLM: completions and chat, plain and streamed."""

from __future__ import annotations

import json

import httpx
import pytest
from _vllm import MAX_MODEL_LEN, SERVED_MODEL_NAME

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_models_lists_the_tiny_model(real_vllm: str) -> None:
    models = httpx.get(f"{real_vllm}/v1/models", timeout=30).json()["data"]
    assert [(m["id"], m["max_model_len"]) for m in models] == [(SERVED_MODEL_NAME, MAX_MODEL_LEN)]


def test_completion_returns_the_requested_tokens(real_vllm: str) -> None:
    body = {
        "model": SERVED_MODEL_NAME,
        "prompt": "The engine keeps",
        "max_tokens": 12,
        "ignore_eos": True,
    }
    reply = httpx.post(f"{real_vllm}/v1/completions", json=body, timeout=60).json()
    assert reply["usage"]["completion_tokens"] == 12
    assert reply["choices"][0]["finish_reason"] == "length"


def test_chat_streams_through_the_chat_template(real_vllm: str) -> None:
    body = {
        "model": SERVED_MODEL_NAME,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_tokens": 6,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", f"{real_vllm}/v1/chat/completions", json=body, timeout=60) as r:
        events = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    # "<s><|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n", as the template says
    assert chunks[-1]["usage"]["prompt_tokens"] > 6
    assert chunks[-1]["usage"]["completion_tokens"] == 6
