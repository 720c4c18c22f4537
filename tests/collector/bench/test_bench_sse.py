"""SSE decoding and chunk parsing against recorded streams of each engine flavour."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotune.collector.bench.sse import DONE, Chunk, ProtocolError, SSEDecoder, parse_chunk

STREAMS = Path(__file__).parent / "streams"


def _decode(raw: bytes, piece: int) -> list[str]:
    dec = SSEDecoder()
    events: list[str] = []
    for i in range(0, len(raw), piece):
        events += dec.feed(raw[i : i + piece])
    return events + dec.close()


def _chunks(name: str, piece: int = 1 << 20) -> list[Chunk | str]:
    events = _decode((STREAMS / name).read_bytes(), piece)
    return [e if e == DONE else parse_chunk(e) for e in events]


@pytest.mark.parametrize("piece", [1, 2, 7, 64, 1 << 20])
@pytest.mark.parametrize("name", sorted(p.name for p in STREAMS.glob("*.sse")))
def test_any_split_of_the_bytes_gives_the_same_events(name: str, piece: int) -> None:
    raw = (STREAMS / name).read_bytes()
    assert _decode(raw, piece) == _decode(raw, 1 << 20)


def test_vllm_completions_usage_only_final_chunk_and_empty_text_chunk() -> None:
    chunks = _chunks("vllm_completions.sse")
    assert [c.text for c in chunks[:4]] == [" the", " cache", "", " batch"]
    assert chunks[3].finish_reason == "length"
    assert chunks[4] == Chunk(
        usage={
            "prompt_tokens": 12,
            "total_tokens": 15,
            "completion_tokens": 3,
            "prompt_tokens_details": None,
        }
    )
    assert chunks[5] == DONE


def test_vllm_chat_role_only_first_chunk_carries_no_text() -> None:
    chunks = _chunks("vllm_chat.sse")
    assert chunks[0] == Chunk(text="")
    assert "".join(c.text for c in chunks if isinstance(c, Chunk)) == "Hello world!"
    assert chunks[4].usage["completion_tokens"] == 3


def test_sglang_null_content_and_null_usage() -> None:
    chunks = _chunks("sglang_chat.sse")
    assert [c.text for c in chunks[:4]] == ["", " data", " model", ""]
    assert chunks[3].finish_reason == "length"
    assert all(c.usage is None for c in chunks[:4])
    assert chunks[4].usage["completion_tokens"] == 2


def test_trtllm_chunks_state_their_tokens_through_logprobs() -> None:
    chunks = _chunks("trtllm_completions.sse")
    assert [c.num_tokens for c in chunks[:3]] == [2, 2, 1]
    assert chunks[3].usage["completion_tokens"] == 5


@pytest.mark.parametrize("piece", [1, 3, 1 << 20])
def test_openai_crlf_comments_event_field_and_multiline_data(piece: int) -> None:
    chunks = _chunks("openai_chat_crlf.sse", piece)
    assert [c.text for c in chunks[:4]] == ["", "Hi", " there", ""]
    assert chunks[3].finish_reason == "stop"
    assert chunks[4].usage["completion_tokens"] == 2
    assert chunks[5] == DONE


def test_in_stream_error_object_is_read_as_an_error() -> None:
    chunks = _chunks("vllm_chat_error.sse")
    assert chunks[1].error == "The model ran out of KV cache blocks"
    assert chunks[1].error_code == 500


def test_nested_openai_error_object() -> None:
    c = parse_chunk(
        '{"error": {"message": "bad model", "type": "invalid_request_error", "code": 404}}'
    )
    assert (c.error, c.error_code) == ("bad model", 404)


def test_lone_cr_line_endings_and_data_without_space() -> None:
    assert _decode(b'data:{"a":1}\r\r: c\rdata: x\r\r', 1) == ['{"a":1}', "x"]


def test_stream_without_trailing_blank_line_is_flushed_at_close() -> None:
    assert _decode(b"data: [DONE]", 4) == [DONE]


@pytest.mark.parametrize(
    "payload",
    [
        "{not json",
        "[1, 2]",
        '"text"',
        '{"choices": {"a": 1}}',
        '{"choices": ["x"]}',
        '{"choices": [{"delta": "hi"}]}',
        '{"choices": [{"text": 5}]}',
        '{"choices": [{"delta": {"content": ["a"]}}]}',
    ],
)
def test_non_object_payload_is_a_protocol_error(payload: str) -> None:
    with pytest.raises(ProtocolError):
        parse_chunk(payload)


def test_whole_chat_response_reads_the_message() -> None:
    c = parse_chunk(
        '{"choices": [{"index": 0, "message": {"role": "assistant", '
        '"content": "hi there"}, "finish_reason": "length"}], '
        '"usage": {"prompt_tokens": 3, "completion_tokens": 2}}'
    )
    assert (c.text, c.finish_reason, c.usage["completion_tokens"]) == ("hi there", "length", 2)
