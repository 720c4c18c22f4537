"""Prompt text for every request of a trace, deterministic for a seed.

Three kinds of sharing reach a real engine's prefix cache as genuinely identical text:

- ``hash_ids`` (Mooncake and canonical traces): each block id maps to one fixed text of
  ``block_size`` tokens, so two requests that share ids share those blocks' text.
- a shared system prompt (``shared_prefix_tokens``) at the start of every conversation.
- sessions: a request whose ``session_id`` was seen before repeats that turn's prompt and a
  stand-in answer of its ``output_tokens``, then adds a new question, so prompts grow with the
  conversation.

Token counts follow the rule in :mod:`collector.workload.tokens` unless a Hugging Face
tokenizer directory is given, in which case prompts are cut to exact token counts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from slotune.collector.bench.client import Prompt
from slotune.collector.errors import ConfigError
from slotune.collector.textfile import read_text
from slotune.collector.workload.tokens import count_tokens, synthetic_text
from slotune.collector.workload.traces import Trace, TraceRequest


class TokenCounter(Protocol):
    """Counts tokens and makes text of an exact token count."""

    def count(self, text: str) -> int: ...

    def text_of(self, num_tokens: int, seed: int) -> str:
        """Text of ``num_tokens`` tokens; for one seed, shorter texts are prefixes of longer."""
        ...


class ApproxCounter:
    """The documented approximation of :mod:`collector.workload.tokens`."""

    def count(self, text: str) -> int:
        return count_tokens(text)

    def text_of(self, num_tokens: int, seed: int) -> str:
        return synthetic_text(num_tokens, seed)


class HFTokenizerCounter:
    """Exact counts from a local Hugging Face tokenizer directory (no network)."""

    def __init__(self, path: str | Path) -> None:
        self._encode, self._decode = _load_tokenizer(Path(path))

    def count(self, text: str) -> int:
        return len(self._encode(text))

    def text_of(self, num_tokens: int, seed: int) -> str:
        if num_tokens <= 0:
            return ""
        # Words are 1-2 tokens in BPE vocabularies: 1 word per token is always enough.
        ids = self._encode(synthetic_text(num_tokens, seed))[:num_tokens]
        return str(self._decode(ids))


def _load_tokenizer(path: Path) -> tuple[Any, Any]:
    if not path.is_dir():
        raise ConfigError(
            f"--tokenizer {path}: not a directory; give a local Hugging Face "
            "tokenizer directory (with tokenizer.json)"
        )
    tokenizers: Any
    try:
        import tokenizers
    except ImportError:
        tokenizers = None
    if tokenizers is not None and (path / "tokenizer.json").is_file():
        text = read_text(path / "tokenizer.json", "tokenizer (tokenizer.json)")
        try:
            tok = tokenizers.Tokenizer.from_str(text)
        except Exception as e:  # the Rust parser's one exception type for every bad file
            raise ConfigError(f"{path}/tokenizer.json: not a tokenizer ({e})") from None
        return (lambda t: tok.encode(t, add_special_tokens=False).ids, lambda ids: tok.decode(ids))
    try:
        from transformers import AutoTokenizer  # type: ignore[import-not-found]
    except ImportError:
        if tokenizers is not None:
            raise ConfigError(
                f"--tokenizer {path}: no tokenizer.json there; give a Hugging Face "
                "tokenizer directory with tokenizer.json (or install "
                "'transformers' for other tokenizer formats)"
            ) from None
        raise ConfigError(
            f"--tokenizer {path}: reading it needs the 'tokenizers' package (for "
            "tokenizer.json) or 'transformers'; install one (pip install tokenizers) or "
            "drop --tokenizer to use the built-in approximation"
        ) from None
    try:
        hf = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as e:
        raise ConfigError(f"--tokenizer {path}: no tokenizer could be loaded there ({e})") from e
    return (lambda t: hf.encode(t, add_special_tokens=False), lambda ids: hf.decode(ids))


def token_counter(tokenizer_path: str | Path | None) -> TokenCounter:
    """The counter for ``--tokenizer PATH``, or the approximation when None."""
    return ApproxCounter() if tokenizer_path is None else HFTokenizerCounter(tokenizer_path)


def _seed(*parts: object) -> int:
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@dataclass(frozen=True, slots=True)
class _Turn:
    messages: tuple[dict[str, str], ...]
    text: str
    input_tokens: int


class PromptBuilder:
    """Builds the prompts of a trace one by one, in trace order (sessions need the order).

    Args:
        seed: makes the text deterministic.
        shared_prefix_tokens: system prompt shared by all conversations, counted in each
            first turn's ``input_tokens`` (a prompt is at least this prefix plus one token).
            Ignored for requests with ``hash_ids``, whose blocks already say what is shared.
        counter: token counter; default the approximation.
    """

    def __init__(
        self, *, seed: int = 0, shared_prefix_tokens: int = 0, counter: TokenCounter | None = None
    ) -> None:
        self._seed = seed
        self._counter = counter or ApproxCounter()
        self._system = (
            self._counter.text_of(shared_prefix_tokens, _seed(seed, "system"))
            if shared_prefix_tokens > 0
            else ""
        )
        self._last_turn: dict[str, tuple[_Turn, int]] = {}

    def build(self, req: TraceRequest, index: int) -> Prompt:
        """The prompt of request ``index`` of the trace; call in increasing index order."""
        c = self._counter
        if req.hash_ids:
            turn = _block_prompt(req, index, self._seed, c)
        else:
            prev = self._last_turn.get(req.session_id) if req.session_id is not None else None
            turn = _session_turn(req, index, self._seed, c, self._system, prev)
            if req.session_id is not None:
                self._last_turn[req.session_id] = (turn, req.output_tokens)
        return Prompt(
            text=turn.text,
            messages=turn.messages,
            input_tokens=turn.input_tokens,
            output_tokens=req.output_tokens,
        )


def build_prompts(
    trace: Trace,
    *,
    seed: int = 0,
    shared_prefix_tokens: int = 0,
    counter: TokenCounter | None = None,
) -> list[Prompt]:
    """One prompt per trace request, in trace order (see :class:`PromptBuilder`)."""
    builder = PromptBuilder(seed=seed, shared_prefix_tokens=shared_prefix_tokens, counter=counter)
    return [builder.build(req, i) for i, req in enumerate(trace.requests)]


def _block_prompt(req: TraceRequest, index: int, seed: int, c: TokenCounter) -> _Turn:
    block = req.block_size or 512
    parts: list[str] = []
    left = req.input_tokens
    for hid in req.hash_ids:
        if left <= 0:
            break
        n = min(block, left)
        parts.append(c.text_of(n, _seed(seed, "block", block, hid)))
        left -= n
    if left > 0:
        parts.append(c.text_of(left, _seed(seed, "tail", index)))
    text = " ".join(parts)
    return _Turn(({"role": "user", "content": text},), text, c.count(text))


def _session_turn(
    req: TraceRequest,
    index: int,
    seed: int,
    c: TokenCounter,
    system: str,
    prev: tuple[_Turn, int] | None,
) -> _Turn:
    if prev is None:
        history_msgs: tuple[dict[str, str], ...] = (
            ({"role": "system", "content": system},) if system else ()
        )
        history_text = system
    else:
        turn, prev_out = prev
        answer = c.text_of(prev_out, _seed(seed, "answer", index, req.session_id))
        history_msgs = (*turn.messages, {"role": "assistant", "content": answer})
        history_text = f"{turn.text} {answer}"
    used = c.count(history_text)
    question = c.text_of(max(req.input_tokens - used, 1), _seed(seed, "question", index))
    text = f"{history_text} {question}" if history_text else question
    messages = (*history_msgs, {"role": "user", "content": question})
    return _Turn(messages, text, c.count(text))
