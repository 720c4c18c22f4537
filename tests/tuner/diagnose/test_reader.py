"""The streaming reader returns exactly the events ``json.load`` sees, whatever the layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotune.tuner.diagnose._reader import TraceStream

TRICKY = "void f<{lambda()#1}, int>(at::TensorIteratorBase&, {lambda(float)#2},\\n)"


def _events(n: int) -> list[dict[str, object]]:
    return [
        {
            "ph": "X",
            "cat": "kernel" if i % 2 else "cpu_op",
            "name": TRICKY if i % 3 == 0 else f"k{i}",
            "pid": 0 if i % 2 else "Spans",
            "tid": 7,
            "ts": 1000 + i * 0.5,
            "dur": -0.001 if i == 5 else 2,
            "args": {"correlation": i, "nested": {"a": [1, {"b": 2}], "c": "},"}, "bytes": 8},
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("layout", ["compact", "indented", "crlf", "one-line"])
def test_reader_matches_json_load(
    tmp_path: Path, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import slotune.tuner.diagnose._reader as reader

    monkeypatch.setattr(reader, "_CHUNK_CHARS", 997)  # many buffers, cut at awkward places
    doc = {"schemaVersion": 1, "traceEvents": _events(300), "traceName": "t"}
    text = {
        "compact": json.dumps(doc).replace("}, {", "},\n{"),
        "indented": json.dumps(doc, indent=2),
        "crlf": json.dumps(doc, indent=1).replace("\n", "\r\n"),
        "one-line": json.dumps(doc),
    }[layout]
    path = tmp_path / "t.json"
    path.write_text(text)
    stream = TraceStream(path)
    got = [e for batch in stream.batches() for e in batch]
    want = json.loads(text)["traceEvents"]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (g.ph, g.cat, g.name, g.ts, g.dur, g.pid) == (
            w["ph"],
            w["cat"],
            w["name"],
            w["ts"],
            w["dur"],
            w["pid"],
        )
        assert g.args is not None and g.args.correlation == w["args"]["correlation"]
    assert stream.metadata == {"schemaVersion": 1, "traceName": "t"}
