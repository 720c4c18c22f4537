"""The token-count approximation used when no tokenizer is given.

Rule: a token is a maximal run of word characters (letters, digits, underscore) or a single
other non-space character. ``"Hello, world!"`` is 4 tokens. Real BPE tokenizers give about
1.3 tokens per English word, so this undercounts prose slightly; the emulated engine counts
prompt tokens with this same rule, so prompts built by :func:`synthetic_text` have exactly
the requested length there. Against a real engine, the server's ``usage`` is the truth.
"""

from __future__ import annotations

import re

import numpy as np

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")

# A fixed vocabulary of short words: synthetic prompts are deterministic for a seed.
_VOCAB = (
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "that",
    "this",
    "it",
    "be",
    "are",
    "or",
    "an",
    "which",
    "data",
    "model",
    "token",
    "cache",
    "batch",
    "prefill",
    "decode",
    "latency",
    "memory",
    "block",
    "server",
    "request",
    "time",
    "value",
    "system",
    "user",
    "query",
    "answer",
    "context",
    "layer",
    "head",
    "vector",
    "kernel",
    "queue",
    "engine",
    "graph",
    "rate",
    "load",
    "node",
    "pool",
    "trace",
    "budget",
    "window",
    "metric",
    "score",
    "stream",
    "chunk",
    "prompt",
    "output",
    "input",
    "alpha",
    "beta",
    "gamma",
    "delta",
    "omega",
    "north",
    "south",
    "east",
    "west",
    "red",
    "green",
    "blue",
    "black",
    "white",
)


def count_tokens(text: str) -> int:
    """Approximate token count of ``text`` (see the module docstring for the rule)."""
    return len(_TOKEN_RE.findall(text))


def split_tokens(text: str) -> list[str]:
    """The tokens of ``text`` under the same rule as :func:`count_tokens`."""
    return _TOKEN_RE.findall(text)


def synthetic_text(num_tokens: int, seed: int) -> str:
    """Deterministic text of exactly ``num_tokens`` tokens under :func:`count_tokens`."""
    if num_tokens <= 0:
        return ""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(_VOCAB), size=num_tokens)
    return " ".join(_VOCAB[i] for i in idx)
