"""Stream the events of one Chrome-format profiler trace (``.json`` or gzip).

A Kineto trace is one JSON object whose ``traceEvents`` array holds every event; files reach
gigabytes, so the array is never loaded whole: the reader keeps a bounded text buffer (a few
MB) whatever the file size.

- Fast path: the buffer's whole events are decoded in one call by ``msgspec`` into
  :class:`RawEvent` structs holding only the fields the analyses read (the rest, such as CPU
  operators' argument lists, is skipped without building Python objects). The buffer is cut
  after its last ``},`` at a line's end, which is where Kineto ends an event.
- Slow path, where that cut is wrong (an object nested in an event ended there) and for the
  top-level object's other keys: the standard library's ``raw_decode``, one value at a time.
  Every error message (truncated file, bad JSON, a field of the wrong type) comes from here.

What real profilers write is read as they write it: roctracer's numbers written as strings
(``"bytes": "9216"``) are numbers. What none writes is refused with the character it is at:
NaN and Infinity (not JSON), ids past int64, times past 1e18 µs, numbers past Python's digit
limit, nesting past its recursion limit, lone surrogate escapes, and values over 64 Mi
characters.

Measured on 20 MB of the replicated shared trace (CPU time, best of 3): this reader 462 MB/s,
``ijson.items`` on its C backend 99 MB/s, ``json.load`` of the whole file 60 MB/s (see
docs/diagnose.md for the whole analysis at 1 GB).

The metadata keys (``schemaVersion``, ``distributedInfo``, ``traceName``, …) may come before or
after ``traceEvents``; they are collected into :attr:`TraceStream.metadata` and are complete only
once the events have been consumed.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, BinaryIO, TextIO

import msgspec

from slotune.collector.errors import ConfigError
from slotune.collector.textfile import open_regular

_CHUNK_CHARS = 1 << 21
# One event larger than this is not a profiler event but a malformed file.
_MAX_VALUE_CHARS = 1 << 26
_BARE_CUT_TRIES = 4
_SKIP = re.compile(r"[\s,]*")
_GZIP_MAGIC = b"\x1f\x8b"


class TraceFileError(ConfigError):
    """A trace file that cannot be analysed; the message names the file and what is missing."""


# Ids are stored in int64 columns; times are µs, bounded so that ``ts + dur`` stays finite and
# exact to the µs (1e18 µs is 31,700 years); other figures need only be finite. The bounds also
# refuse NaN and infinity.
Id = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
Micros = Annotated[float, msgspec.Meta(ge=-1e18, le=1e18)]
Finite = Annotated[float, msgspec.Meta(ge=-1.7e308, le=1.7e308)]


class RawArgs(msgspec.Struct, frozen=True, gc=False):
    """The ``args`` of an event that the analyses read."""

    correlation: Id | None = None
    device: Id | None = None
    bytes: Finite = 0.0
    # Joins a CPU operator to the kernels it launched; the operator carries its FLOP count
    # when the profiler ran with_flops=True.
    external_id: Id | None = msgspec.field(default=None, name="External id")
    flops: Finite = 0.0


class RawEvent(msgspec.Struct, frozen=True, gc=False):
    """One trace event, reduced to what the analyses read (``ts``/``dur`` in µs).

    ``gc=False``: events hold only strings, numbers and :class:`RawArgs`, never a cycle, so
    the garbage collector need not track the millions a large trace holds (about 1.5x faster).
    """

    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: Micros = 0.0
    dur: Micros = 0.0
    pid: Id | str = 0
    args: RawArgs | None = None


class _NotJSON(ValueError):
    """A constant (NaN, Infinity) that Python's decoder accepts and JSON does not."""


class TraceStream:
    """The events of one trace file, streamed; :attr:`metadata` fills in as they are read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.metadata: dict[str, Any] = {}
        self._decode = json.JSONDecoder(parse_constant=_refuse_constant).raw_decode
        # strict=False: numbers written as strings are read as numbers (roctracer writes
        # ``"bytes": "9216"``); anything else of the wrong type is still refused.
        self._load_list = msgspec.json.Decoder(list[RawEvent], strict=False).decode
        self._buf = ""
        self._pos = 0
        self._consumed = 0  # characters dropped from the buffer's front
        self._eof = False

    def batches(self) -> Iterator[list[RawEvent]]:
        """The events of ``traceEvents`` in file order, a list at a time (so the per-event
        cost is the caller's loop alone); items that are not JSON objects are skipped.

        Raises:
            TraceFileError: the file is not JSON, is truncated, or has no ``traceEvents``.
        """
        with (
            open_regular(self.path, "profiler trace", TraceFileError) as raw,
            _as_text(raw) as f,
        ):
            try:
                yield from self._walk(f)
            except UnicodeDecodeError as e:
                raise TraceFileError(
                    f"{self.path}: not a text JSON trace (byte {e.start} is not UTF-8); "
                    "pass the profiler's .json or .json.gz export"
                ) from e
            except (OSError, EOFError, zlib.error) as e:  # gzip: cut short, bad CRC
                raise TraceFileError(
                    f"{self.path}: truncated or corrupt gzip ({e}); copy or export the trace again"
                ) from e

    def _walk(self, f: TextIO) -> Iterator[list[RawEvent]]:
        if self._peek(f) == "[":
            raise TraceFileError(
                f"{self.path}: unknown profiler version (a bare event array, as the legacy "
                "autograd profiler writes, without GPU correlation); record with torch.profiler"
            )
        self._expect(f, "{", "a JSON object (the profiler's Chrome trace export)")
        found_events = False
        while True:
            if self._peek(f) == "}":
                break
            key = self._value(f)
            if not isinstance(key, str):
                self._fail("a key of the top-level object")
            self._expect(f, ":", f"':' after the key {key!r}")
            if key == "traceEvents":
                found_events = True
                self._expect(f, "[", "the traceEvents array")
                yield from self._array_items(f)
            else:
                self.metadata[key] = self._value(f)
        if not found_events:
            raise TraceFileError(
                f"{self.path}: no 'traceEvents' array; this is not a PyTorch profiler / Kineto "
                "trace (export one with torch.profiler ... export_chrome_trace)"
            )

    def _array_items(self, f: TextIO) -> Iterator[list[RawEvent]]:
        """The events of the array whose ``[`` was just read, up to and past its ``]``
        (module docstring: the fast path, and the slow one up to where its cut failed)."""
        one_by_one_until = -1
        while True:
            if len(self._buf) - self._pos < _CHUNK_CHARS:
                self._fill(f)
            consumed = self._consumed
            cuts = [c for c in self._cuts() if consumed + c > one_by_one_until]
            batch = None
            for cut in cuts:
                try:
                    batch = self._load_list("[" + self._buf[self._pos : cut + 1] + "]")
                except (msgspec.DecodeError, RecursionError):  # the slow path says why
                    continue
                self._pos = cut + 2
                break
            if batch is not None:
                yield batch
                continue
            if cuts:
                one_by_one_until = consumed + cuts[0]
            if self._peek(f) == "]":
                self._pos += 1
                return
            start = self._consumed + self._pos
            item = self._value(f)
            if isinstance(item, dict):
                yield [self._event(item, start)]

    def _cuts(self) -> list[int]:
        """Where the buffer's whole events may end, best first: the last ``},`` at a line's
        end (a JSON string holds no raw newline, so no kernel name ends there), else, for a
        file on one line, the last few bare ``},``."""
        cut = max(self._buf.rfind("},\n", self._pos), self._buf.rfind("},\r\n", self._pos))
        if cut > self._pos:
            return [cut]
        cuts: list[int] = []
        end = len(self._buf)
        while len(cuts) < _BARE_CUT_TRIES:
            end = self._buf.rfind("},", self._pos, end)
            if end <= self._pos:
                break
            cuts.append(end)
        return cuts

    def _event(self, item: dict[str, Any], offset: int) -> RawEvent:
        try:
            event = msgspec.convert(item, RawEvent, strict=False)
            # msgspec's own decoder refuses lone surrogates; Python's keeps them in strings.
            for text in (event.ph, event.cat, event.name, event.pid):
                if isinstance(text, str):
                    text.encode()
            return event
        except msgspec.ValidationError as e:
            raise TraceFileError(
                f"{self.path}: the event at character {offset:,} has a field of the wrong type "
                f"or out of range ({e}); re-export the trace"
            ) from e
        except UnicodeEncodeError as e:
            raise TraceFileError(
                f"{self.path}: the event at character {offset:,} holds a string that is not "
                f"Unicode (a lone surrogate escape {e.object[e.start : e.end]!r}); no profiler "
                "writes one: re-export the trace"
            ) from e

    def _fill(self, f: TextIO) -> bool:
        """Append one chunk to the buffer (dropping what was consumed); False at end of file."""
        if self._eof:
            return False
        more = f.read(_CHUNK_CHARS)
        if not more:
            self._eof = True
            return False
        self._consumed += self._pos
        self._buf = self._buf[self._pos :] + more
        self._pos = 0
        return True

    def _peek(self, f: TextIO) -> str:
        """The next character that is not whitespace or a comma."""
        while True:
            self._pos = _SKIP.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._fill(f):
                self._fail("more JSON (the file ends here)")

    def _expect(self, f: TextIO, char: str, what: str) -> None:
        if self._peek(f) != char:
            self._fail(what)
        self._pos += 1

    def _value(self, f: TextIO) -> Any:
        """Decode the next JSON value, reading more of the file until it is complete."""
        self._peek(f)
        while True:
            try:
                value, self._pos = self._decode(self._buf, self._pos)
                return value
            except json.JSONDecodeError as e:
                # Most often the value runs past the buffer: read more and retry.
                if len(self._buf) - self._pos > _MAX_VALUE_CHARS:
                    self._refuse(_oversized(e))
                if not self._fill(f):
                    self._fail("a complete JSON value", _runs_to_end(self._buf, e))
            except _NotJSON as e:
                self._refuse(f"{e} is not JSON (a profiler writes finite numbers)")
            except RecursionError:
                self._refuse("a value nested deeper than Python's JSON reader can follow")
            except ValueError:  # int(): past Python's limit on the digits it converts
                self._refuse(f"a number of more than {sys.get_int_max_str_digits():,} digits")

    def _refuse(self, what: str) -> Any:
        raise TraceFileError(
            f"{self.path}: at character {self._consumed + self._pos:,}: {what}; pass the "
            "profiler's .json or .json.gz export"
        )

    def _fail(self, what: str, truncated: bool | None = None) -> Any:
        offset = self._consumed + self._pos
        if truncated is None:
            truncated = self._eof and self._pos >= len(self._buf.rstrip()) - 1
        if truncated:
            raise TraceFileError(
                f"{self.path}: truncated: the JSON ends at character {offset:,} where "
                f"{what} was expected; copy or export the trace again"
            )
        near = self._buf[self._pos : self._pos + 40].replace("\n", " ")
        raise TraceFileError(
            f"{self.path}: not valid JSON at character {offset:,} (expected {what}, found "
            f"{near!r}); pass the profiler's .json or .json.gz export"
        )


def _refuse_constant(name: str) -> float:
    raise _NotJSON(name)


def _oversized(error: json.JSONDecodeError) -> str:
    what = "a string" if error.msg.startswith("Unterminated string") else "a value"
    return (
        f"{what} longer than {_MAX_VALUE_CHARS:,} characters (a profiler event is at most a few "
        "KB), so this is no profiler trace or the file is corrupt"
    )


def _runs_to_end(buf: str, error: json.JSONDecodeError) -> bool:
    """Whether a decode error is the end of the text cutting a value short (not bad JSON):
    the error is at the very end, or an unterminated string runs to it."""
    if error.pos >= len(buf.rstrip()) - 1:
        return True
    return error.msg.startswith("Unterminated string") and '"' not in buf[error.pos + 1 :]


def _as_text(raw: BinaryIO) -> TextIO:
    magic = raw.read(2)
    raw.seek(0)
    if magic == _GZIP_MAGIC:
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw, mode="rb"), encoding="utf-8")
    return io.TextIOWrapper(raw, encoding="utf-8")
