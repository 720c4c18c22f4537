"""Prompt text: deterministic, exact lengths, genuinely shared blocks, growing sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotune.collector.bench.prompts import PromptBuilder, build_prompts, token_counter
from slotune.collector.errors import ConfigError
from slotune.collector.workload import named_workload
from slotune.collector.workload.synthetic import parse_length_spec, synthetic_trace
from slotune.collector.workload.tokens import count_tokens, synthetic_text
from slotune.collector.workload.traces import Trace, TraceRequest


def _blocks_trace() -> Trace:
    return Trace(
        "blocks",
        (
            TraceRequest(0.0, 1024 + 100, 10, hash_ids=(7, 8, 9), block_size=1024),
            TraceRequest(1.0, 1024 + 300, 10, hash_ids=(7, 8, 11), block_size=1024),
            TraceRequest(2.0, 900, 10, hash_ids=(12,), block_size=1024),
        ),
    )


def test_prompts_have_exactly_the_asked_tokens_and_repeat_for_a_seed() -> None:
    trace = synthetic_trace(parse_length_spec("uniform:5,300"), parse_length_spec("16"), 30, seed=4)
    a = build_prompts(trace, seed=1)
    assert [p.input_tokens for p in a] == [r.input_tokens for r in trace.requests]
    assert all(count_tokens(p.text) == p.input_tokens for p in a)
    assert a == build_prompts(trace, seed=1)
    assert a[0].text != build_prompts(trace, seed=2)[0].text
    assert len({p.text for p in a}) == 30  # no accidental sharing


def test_equal_hash_ids_give_identical_block_text() -> None:
    a, b, c = build_prompts(_blocks_trace(), seed=0)
    shared = " ".join(a.text.split()[:1024])
    assert " ".join(b.text.split()[:1024]) == shared  # block 7 identical
    # block 8 is cut to 100 and 300 tokens: the shorter is a prefix of the longer
    assert a.text.split()[1024:] == b.text.split()[1024:1124]
    assert c.text.split()[:900] != a.text.split()[:900]
    assert [p.input_tokens for p in (a, b, c)] == [1124, 1324, 900]


def test_bundled_mooncake_prefixes_are_shared_text() -> None:
    trace = named_workload("mooncake-conversation")
    reqs = trace.requests[:200]
    prompts = build_prompts(Trace("m", reqs), seed=0)
    by_first_block: dict[int, set[str]] = {}
    for r, p in zip(reqs, prompts, strict=True):
        if len(r.hash_ids) > 1:
            by_first_block.setdefault(r.hash_ids[0], set()).add(" ".join(p.text.split()[:512]))
    assert by_first_block and all(len(texts) == 1 for texts in by_first_block.values())
    assert [p.input_tokens for p in prompts] == [r.input_tokens for r in reqs]


def test_shared_system_prompt_opens_every_conversation() -> None:
    trace = synthetic_trace(
        parse_length_spec("50"), parse_length_spec("10"), 4, shared_prefix_tokens=200
    )
    prompts = build_prompts(trace, seed=0, shared_prefix_tokens=200)
    heads = {" ".join(p.text.split()[:200]) for p in prompts}
    assert len(heads) == 1
    assert all(p.input_tokens == 250 for p in prompts)
    assert prompts[0].messages[0]["role"] == "system"


def test_sessions_grow_with_the_conversation() -> None:
    trace = synthetic_trace(
        parse_length_spec("40"), parse_length_spec("20"), 6, turns=3, shared_prefix_tokens=30
    )
    prompts = build_prompts(trace, seed=0, shared_prefix_tokens=30)
    # two conversations, interleaved: requests 0,2,4 are session-0's turns
    s0 = [prompts[i] for i in (0, 2, 4)]
    assert [p.input_tokens for p in s0] == [70, 130, 190]
    assert [r.input_tokens for r in trace.requests] == [p.input_tokens for p in prompts]
    assert s0[1].text.startswith(s0[0].text) and s0[2].text.startswith(s0[1].text)
    roles = [m["role"] for m in s0[2].messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]


def test_builder_in_order_matches_the_whole_list() -> None:
    trace = synthetic_trace(parse_length_spec("12"), parse_length_spec("3"), 5, turns=2)
    builder = PromptBuilder(seed=9)
    assert [builder.build(r, i) for i, r in enumerate(trace.requests)] == build_prompts(
        trace, seed=9
    )


def _word_tokenizer_dir(path: Path) -> Path:
    """A local Hugging Face tokenizer directory: word-level, over the synthetic vocabulary,
    where punctuation splits off (so counts differ from the built-in rule on real text)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = sorted({w for w in synthetic_text(5000, 0).split()})
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path.mkdir()
    tok.save(str(path / "tokenizer.json"))
    return path


def test_local_tokenizer_gives_exact_counts(tmp_path: Path) -> None:
    counter = token_counter(_word_tokenizer_dir(tmp_path / "tok"))
    assert counter.count("alpha, beta!") == 4
    text = counter.text_of(37, seed=5)
    assert counter.count(text) == 37
    assert counter.text_of(10, seed=5).split() == text.split()[:10]
    prompts = build_prompts(_blocks_trace(), seed=0, counter=counter)
    assert [p.input_tokens for p in prompts] == [1124, 1324, 900]
    assert prompts[0].text.split()[:1024] == prompts[1].text.split()[:1024]


def test_tokenizer_directory_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        token_counter(tmp_path / "missing")
    with pytest.raises(ConfigError, match="--tokenizer"):
        token_counter(tmp_path)  # a directory without any tokenizer file
