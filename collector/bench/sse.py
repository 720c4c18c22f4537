"""Server-sent events from OpenAI-compatible engines, read incrementally.

A laxer reader than the WHATWG algorithm where the engines are lax: lines end in ``\\n``,
``\\r\\n`` or ``\\r``; ``:`` lines are keep-alive comments; several ``data:`` lines form one
event; ``event:``/``id:``/``retry:`` fields are ignored. :func:`parse_chunk` then reads one
event's JSON the way vLLM, SGLang, TensorRT-LLM and OpenAI write it: a role-only first chunk,
chunks with empty ``choices``, a usage-only final chunk, ``[DONE]``, and in-stream error objects.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

DONE = "[DONE]"


class SSEDecoder:
    """Turns received bytes into complete event payloads (the joined ``data`` lines)."""

    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []

    def feed(self, data: bytes) -> list[str]:
        """Add received bytes; return the payloads of the events they completed."""
        buf = self._buf + data if self._buf else data
        if b"\r" in buf:
            # A "\r" at the very end may be the first half of "\r\n": keep it for later.
            tail = b"\r" if buf.endswith(b"\r") else b""
            body = buf[:-1] if tail else buf
            buf = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail
            if tail:
                *lines, rest = buf[:-1].split(b"\n")
                self._buf = rest + tail
                return self._lines(lines)
        *lines, rest = buf.split(b"\n")
        self._buf = rest
        return self._lines(lines)

    def close(self) -> list[str]:
        """Flush an event left open when the stream ended without a blank line."""
        lines = [self._buf.rstrip(b"\r"), b""] if self._buf else [b""]
        self._buf = b""
        return self._lines(lines)

    def _lines(self, lines: list[bytes]) -> list[str]:
        events: list[str] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append("\n".join(data))
                    data.clear()
            elif line.startswith(b"data:"):
                value = line[6:] if line[5:6] == b" " else line[5:]
                data.append(value.decode("utf-8", errors="replace"))
            elif line == b"data":
                data.append("")
            # ":" comments and event/id/retry fields carry nothing we use
        return events


class ProtocolError(ValueError):
    """An event that is not the JSON an OpenAI-compatible server sends."""


class Chunk(NamedTuple):
    """What one streamed event carried (a tuple: built once per event, so it must be cheap).

    Attributes:
        text: generated text (completion ``text``, chat ``delta.content`` and
            ``delta.reasoning_content``), "" for role-only or usage-only chunks.
        num_tokens: tokens the chunk states explicitly (``token_ids`` or logprobs); None
            when only text is given.
        finish_reason: the choice's ``finish_reason`` if present.
        usage: the ``usage`` object if present (the final chunk under ``include_usage``).
        error: the message of an in-stream error object.
        error_code: the HTTP-like code of that error, when given.
    """

    text: str = ""
    num_tokens: int | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: str | None = None
    error_code: int | None = None


# Token counts and error codes past this are not numbers a server means (1e999, 400 digits).
MAX_COUNT = 2**31 - 1


def parse_chunk(payload: str) -> Chunk:
    """Read one event payload (not ``[DONE]``).

    Raises:
        ProtocolError: the payload is not a JSON object of the expected shape, nests too
            deep for the parser, or carries counts that are not counts. Nothing else.
    """
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError) as e:
        # ValueError: not JSON, or an integer past Python's digit limit;
        # RecursionError: nested deeper than the parser's stack.
        raise ProtocolError(
            f"event is not usable JSON ({type(e).__name__}): {payload[:80]!r}"
        ) from e
    if not isinstance(obj, dict):
        raise ProtocolError(f"event is not a JSON object: {payload[:80]!r}")
    if "error" in obj or obj.get("object") == "error":
        return _error_chunk(obj)
    usage = obj.get("usage")
    if usage is not None and not isinstance(usage, dict):
        usage = None
    if usage is not None:
        usage = _checked_usage(usage, payload)
    choices = obj.get("choices")
    if not choices:
        return Chunk(usage=usage)
    try:
        choice = choices[0]
        delta = choice.get("delta") or choice.get("message")  # streamed / whole chat responses
        if delta is None:
            text = choice.get("text") or ""
        else:
            text = (delta.get("content") or "") + (delta.get("reasoning_content") or "")
        if not isinstance(text, str):
            raise TypeError("the text is not a string")
        token_ids = choice.get("token_ids")
        logprobs = choice.get("logprobs")
        if token_ids is not None:
            num_tokens: int | None = len(token_ids)
        elif logprobs is not None:
            num_tokens = _logprob_tokens(logprobs)
        else:
            num_tokens = None
        return Chunk(text, num_tokens, choice.get("finish_reason"), usage)
    except (AttributeError, TypeError, IndexError, KeyError) as e:
        raise ProtocolError(f"event has an unexpected shape ({e}): {payload[:80]!r}") from e


def _checked_usage(usage: dict[str, Any], payload: str) -> dict[str, Any]:
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            raise ProtocolError(
                f"usage.{key} is not a token count from 0 to {MAX_COUNT}: {payload[:80]!r}"
            )
    return usage


def _logprob_tokens(logprobs: Any) -> int | None:
    if not isinstance(logprobs, dict):
        return None
    content = logprobs.get("content")  # chat
    if isinstance(content, list):
        return len(content)
    tokens = logprobs.get("tokens")  # completions
    if isinstance(tokens, list):
        return len(tokens)
    return None


def _error_chunk(obj: dict[str, Any]) -> Chunk:
    err = obj.get("error", obj)
    if isinstance(err, dict):
        message = str(err.get("message") or err)
        code = err.get("code")
    else:
        message, code = str(err), obj.get("code")
    code_int = code if isinstance(code, int) and 0 <= code <= MAX_COUNT else None
    if isinstance(code, str) and code.isdecimal() and len(code) <= 3:
        code_int = int(code)
    return Chunk(error=message[:300], error_code=code_int)
