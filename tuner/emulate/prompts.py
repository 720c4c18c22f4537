"""Prompt tokens in, output words out: the emulated engine's stand-in for a tokenizer.

A prompt given as text is split by the shared rule of :mod:`collector.workload.tokens` (a run
of word characters, or one other non-space character, is one token). Each token string maps to
a stable id (CRC-32 of its UTF-8 bytes), so identical text prefixes give identical id prefixes
and therefore real prefix-cache hits. A chat request is rendered as one ``"<role>: <content>"``
line per message before counting, which stands in for the model's chat template.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from slotune.collector.workload.tokens import split_tokens

# Output words: each is exactly one token under the shared rule, so a client that re-counts
# the streamed text gets the server's completion_tokens.
_OUTPUT_WORDS = (
    "the",
    "model",
    "answers",
    "with",
    "tokens",
    "from",
    "an",
    "emulated",
    "engine",
    "that",
    "keeps",
    "time",
    "like",
    "a",
    "real",
    "gpu",
    "batch",
    "of",
    "requests",
    "in",
    "flight",
    "cache",
    "blocks",
    "fill",
    "and",
    "drain",
    "as",
    "load",
    "rises",
    "falls",
    "again",
    "here",
)


def token_ids_of_text(text: str) -> list[int]:
    """Deterministic token ids of ``text``: one id per token, equal tokens give equal ids."""
    return [zlib.crc32(token.encode("utf-8")) & 0x7FFFFFFF for token in split_tokens(text)]


def render_chat(messages: Sequence[tuple[str, str]]) -> str:
    """The text counted for a chat request: one ``"role: content"`` line per message."""
    return "\n".join(f"{role}: {content}" for role, content in messages)


def output_text(request_seed: int, start: int, num_tokens: int) -> str:
    """Output tokens ``start .. start+num_tokens-1`` of a request, each rendered as ``" word"``."""
    words = _OUTPUT_WORDS
    return "".join(
        " " + words[(request_seed + i * 7) % len(words)] for i in range(start, start + num_tokens)
    )
