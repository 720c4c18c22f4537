"""Server-sent events from OpenAI-compatible engines, read incrementally.

A laxer reader than the WHATWG algorithm where the engines are lax: lines end in ``\\n``,
``\\r\\n`` or ``\\r``; ``:`` lines are keep-alive comments; several ``data:`` lines form one
event; ``event:``/``id:``/``retry:`` fields are ignored. :func:`parse_chunk` then reads one
event's JSON the way vLLM, SGLang, TensorRT-LLM and OpenAI write it: a role-only first chunk,
chunks with empty ``choices``, a usage-only final chunk, ``[DONE]``, and in-stream error objects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DONE = "[DONE]"


class SSEDecoder:
    """Turns received bytes into complete event payloads (the joined ``data`` lines)."""

    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []

    def feed(self, data: bytes) -> list[str]:
        """Add received bytes; return the payloads of the events they completed."""
        buf = self._buf + data
        events: list[str] = []
        start = 0
        n = len(buf)
        while start < n:
            nl = _line_end(buf, start)
            if nl < 0:
                break
            end = nl
            # A lone "\r" at the very end may be the first half of "\r\n": wait for more.
            if buf[nl] == 0x0D:
                if nl + 1 == n:
                    break
                step = 2 if buf[nl + 1] == 0x0A else 1
            else:
                step = 1
            self._line(buf[start:end], events)
            start = nl + step
        self._buf = buf[start:]
        return events

    def close(self) -> list[str]:
        """Flush an event left open when the stream ended without a blank line."""
        events: list[str] = []
        if self._buf:
            self._line(self._buf.rstrip(b"\r"), events)
            self._buf = b""
        if self._data:
            events.append("\n".join(self._data))
            self._data = []
        return events

    def _line(self, line: bytes, events: list[str]) -> None:
        if not line:
            if self._data:
                events.append("\n".join(self._data))
                self._data = []
            return
        if line[:1] == b":":
            return
        name, sep, value = line.partition(b":")
        if name != b"data":
            return
        if sep and value[:1] == b" ":
            value = value[1:]
        self._data.append(value.decode("utf-8", errors="replace"))


def _line_end(buf: bytes, start: int) -> int:
    lf = buf.find(b"\n", start)
    cr = buf.find(b"\r", start, lf if lf >= 0 else len(buf))
    return cr if cr >= 0 else lf


class ProtocolError(ValueError):
    """An event that is not the JSON an OpenAI-compatible server sends."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """What one streamed event carried.

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


def parse_chunk(payload: str) -> Chunk:
    """Read one event payload (not ``[DONE]``).

    Raises:
        ProtocolError: the payload is not a JSON object.
    """
    try:
        obj = json.loads(payload)
    except json.JSONDecodeError as e:
        raise ProtocolError(f"event is not JSON: {payload[:80]!r}") from e
    if not isinstance(obj, dict):
        raise ProtocolError(f"event is not a JSON object: {payload[:80]!r}")
    if "error" in obj or obj.get("object") == "error":
        return _error_chunk(obj)
    usage = obj.get("usage")
    choices = obj.get("choices") or ()
    if not choices:
        return Chunk(usage=usage if isinstance(usage, dict) else None)
    choice = choices[0]
    text, num_tokens = _choice_content(choice)
    return Chunk(text=text, num_tokens=num_tokens, finish_reason=choice.get("finish_reason"),
                 usage=usage if isinstance(usage, dict) else None)


def _choice_content(choice: dict[str, Any]) -> tuple[str, int | None]:
    delta = choice.get("delta") or choice.get("message")  # streamed / whole chat responses
    if isinstance(delta, dict):
        text = (delta.get("content") or "") + (delta.get("reasoning_content") or "")
    else:
        text = choice.get("text") or ""
    token_ids = choice.get("token_ids")
    if isinstance(token_ids, list):
        return text, len(token_ids)
    return text, _logprob_tokens(choice.get("logprobs"))


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
    try:
        code_int = int(code) if code is not None else None
    except (TypeError, ValueError):
        code_int = None
    return Chunk(error=message, error_code=code_int)
