"""Decode the JSON users hand us (measurements, traces, result files, request bodies).

Python's decoder accepts what no JSON producer means: ``NaN`` and ``Infinity``, ``1e999``
(infinity again), integers of thousands of digits (an ``OverflowError`` or a minutes-long
conversion later), ``\\ud800`` (a lone surrogate, which no UTF-8 encoder can write back), and
nesting that exhausts the stack (``RecursionError``). :func:`read_json` refuses each of them
with one :class:`~slotune.collector.errors.ConfigError` (or the subclass the caller names)
that names the source and the field, so every reader has the same limits and none has to
remember them.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import msgspec

from slotune.collector.errors import ConfigError

MAX_JSON_DEPTH = 64
# 20 digits hold every 64-bit id; no count, time or size a user writes is longer.
MAX_INT_DIGITS = 20
MAX_JSON_CHARS = 64 << 20
_INT_LIMIT = 10**MAX_INT_DIGITS
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)  # a string whole, or a bracket

# msgspec refuses NaN, infinity and lone surrogates itself, ~5x faster than the standard
# decoder with number hooks; the standard decoder runs only to explain a refusal.
_FAST = msgspec.json.Decoder()


class _Constant:
    """``NaN`` or ``Infinity``, as the explaining decoder marks them."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_EXPLAIN = json.JSONDecoder(parse_constant=_Constant)


def _depth(text: str) -> int:
    depth = deepest = 0
    for m in _TOKENS.finditer(text):
        c = m[0]
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def _ints_bounded(data: Any) -> bool:
    stack = [data]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is int:
            if not -_INT_LIMIT < value < _INT_LIMIT:
                return False
        elif kind is list:
            stack.extend(value)
        elif kind is dict:
            stack.extend(value.values())
    return True


def _field(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path) or "(the whole value)"


def is_unicode(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_refusal(data: Any) -> str | None:
    """Where the first refused value is, and why; None if nowhere."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        where = f"field {_field(path)!r}"
        if isinstance(value, _Constant):
            return f"{where}: {value.text} is not a number JSON allows"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{where}: a number too large to be finite"
        if isinstance(value, int) and not -_INT_LIMIT < value < _INT_LIMIT:
            return f"{where}: an integer of more than {MAX_INT_DIGITS} digits"
        if isinstance(value, str) and not is_unicode(value):
            return f"{where}: holds a lone surrogate (\\ud800-\\udfff), not text"
        if isinstance(value, dict):
            for k, v in reversed(value.items()):
                if not is_unicode(k):
                    return f"a key in {where} holds a lone surrogate (\\ud800-\\udfff)"
                stack.append((v, (*path, k)))
        elif isinstance(value, list):
            stack.extend((v, (*path, i)) for i, v in reversed(list(enumerate(value))))
    return None


def _explain(text: str, fast_error: Exception) -> str:
    """Why msgspec refused ``text``, in the words of the field it names."""
    try:
        data = _EXPLAIN.decode(text)
    except json.JSONDecodeError as e:
        return f"not valid JSON ({e.msg} at column {e.colno})"
    except (ValueError, RecursionError):  # past Python's 4,300-digit limit on integers
        return f"an integer of more than {MAX_INT_DIGITS} digits"
    return _first_refusal(data) or f"not valid JSON ({fast_error})"


def read_json(
    text: str | bytes,
    *,
    source: str,
    error: type[ConfigError] = ConfigError,
    max_chars: int = MAX_JSON_CHARS,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """Decode one JSON value within the limits above.

    Args:
        text: the JSON text (bytes are read as UTF-8).
        source: what to name in errors: a file and line (``trace.jsonl:12``), ``request body``.
        error: the error class raised.
        max_chars: longest text accepted.
        max_depth: deepest nesting of arrays and objects accepted.

    Returns:
        The value, with only finite floats, integers of at most :data:`MAX_INT_DIGITS`
        digits and strings that are Unicode text.

    Raises:
        ``error``: not UTF-8, not JSON, too long, too deep, or a refused value, naming
            ``source`` and, for a value, its field (``a.b.0``).
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise error(f"{source}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    if len(text) > max_chars:
        raise error(f"{source}: longer than {max_chars:,} characters")
    if text.count("[") + text.count("{") > max_depth and _depth(text) > max_depth:
        raise error(f"{source}: nests deeper than {max_depth} levels; no input needs that")
    try:
        data = _FAST.decode(text)
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError) as e:
        raise error(f"{source}: {_explain(text, e)}") from None
    if not _ints_bounded(data):
        raise error(f"{source}: {_first_refusal(data)}")
    return data
