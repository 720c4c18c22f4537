"""Routing features read from OpenAI request bodies."""

from __future__ import annotations

from slotune.collector.workload.tokens import synthetic_text
from slotune.tuner.fleet.estimator import MIN_OBSERVATIONS, OutputLengthEstimator
from slotune.tuner.fleet.policy import RequestInfo
from slotune.tuner.fleet.route_request import block_hashes, prompt_features, request_info


def _info(
    body: dict[str, object],
    headers: dict[str, str] | None = None,
    est: OutputLengthEstimator | None = None,
) -> RequestInfo:
    return request_info(
        "r1",
        body,
        headers or {},
        default_model="m",
        block_size=16,
        estimator=est or OutputLengthEstimator(prior_tokens=100),
    )


def test_completion_text_prompt() -> None:
    info = _info({"model": "x", "prompt": synthetic_text(300, 1), "max_tokens": 50, "user": "u1"})
    assert info.model == "x"
    assert info.input_tokens == 300  # word prompts count exactly
    assert info.max_tokens == 50
    assert info.expected_output_tokens == 50.0
    assert info.client_key == "u1"
    assert info.session_id == "u1"
    # 300 tokens of about 5.5 bytes: full 64-byte blocks
    assert len(info.prefix_hashes) == len(synthetic_text(300, 1).encode()) // 64


def test_chat_and_token_id_prompts_and_defaults() -> None:
    chat = _info(
        {
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hello there"}]},
            ],
            "max_completion_tokens": 7,
        },
        {"X-Session-Id": "s9"},
    )
    assert chat.model == "m"
    assert chat.input_tokens == 6  # words of "system: be brief\nuser: hello there"
    assert chat.max_tokens == 7
    assert chat.session_id == "s9"
    assert chat.client_key is None
    ids = _info({"prompt": list(range(100))})
    assert ids.input_tokens == 100
    assert len(ids.prefix_hashes) == 100 // 16
    assert ids.expected_output_tokens == 100.0  # the prior: no max_tokens, nothing observed
    assert _info({"prompt": None}).input_tokens == 0


def test_shared_prefixes_share_leading_block_ids_only() -> None:
    system = synthetic_text(400, 7)
    a = _info({"prompt": system + " " + synthetic_text(200, 1)}).prefix_hashes
    b = _info({"prompt": system + " " + synthetic_text(200, 2)}).prefix_hashes
    common = len(system.encode()) // 64
    assert a[:common] == b[:common]
    assert a[common + 1 :] != b[common + 1 :]
    # chained: a block equal in content but after a different prefix gets a different id
    assert block_hashes(b"x" * 64 + b"y" * 64, 64)[1] != block_hashes(b"z" * 64 + b"y" * 64, 64)[1]
    assert len(block_hashes(b"a" * 64 * 1000, 64)) == 256  # bounded


def test_expected_output_comes_from_the_estimator_without_max_tokens() -> None:
    est = OutputLengthEstimator(prior_tokens=100)
    for _ in range(MIN_OBSERVATIONS):
        est.observe("m", "u1", 1000)
    assert abs(_info({"prompt": "hi", "user": "u1"}, est=est).expected_output_tokens - 1000) < 20
    assert prompt_features({"prompt": "   "}, 16) == (0, ())
