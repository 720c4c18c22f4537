"""``diagnose trace`` on hostile and real-world traces: each bad file is one line, every
``--json`` output is strict JSON, and a ROCm trace (numbers written as strings) reads as the
same CUDA trace does."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from slotune.ui.cli import app

DATA = Path(__file__).resolve().parents[2] / "data" / "gputraces"
SHARED = Path("/work/shared/data/gputraces")
CUDA_TRACES = sorted(
    {p.name: p for p in [*DATA.glob("*.json.gz"), *SHARED.glob("*.json.gz")]}.values()
)

KERNEL = '{"ph":"X","cat":"kernel","name":"k","ts":10,"dur":5,"args":{"correlation":1}}'
LAUNCH = '{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1,"dur":2,"args":{"correlation":1}}'


def _trace(*, meta: str = "", kernel: str = KERNEL) -> str:
    return '{"schemaVersion":1,' + meta + '"traceEvents":[' + LAUNCH + ",\n" + kernel + "]}"


def _refuse_constant(name: str) -> Any:
    raise AssertionError(f"{name} in --json output")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            _trace(kernel=KERNEL.replace('"correlation":1', '"correlation":9223372036854775808')),
            "<= 9223372036854775807 - at `$.args.correlation`",
        ),
        (
            _trace(
                kernel=KERNEL.replace('"args":{', '"args":{"External id":-9223372036854775809,')
            ),
            ">= -9223372036854775808",
        ),
        (_trace(meta='"x":' + "[" * 1500 + "]" * 1500 + ","), "nested deeper than"),
        (
            _trace(
                kernel=KERNEL.replace('"args":{', '"args":{"x":' + "[" * 1500 + "]" * 1500 + ",")
            ),
            "nested deeper than",
        ),
        (
            _trace(kernel=KERNEL.replace('"ts":10', '"ts":' + "9" * 5000)),
            "a number of more than 4,300 digits",
        ),
        (_trace(kernel=KERNEL.replace('"args":{', '"args":{"\\ud800":1,')), "lone surrogate"),
        (_trace(kernel=KERNEL.replace('"name":"k"', '"name":"k\\udfff"')), "lone surrogate"),
        (
            _trace(meta='"distributedInfo":{"rank":"x","world_size":2},'),
            "distributedInfo is not what torch.distributed writes",
        ),
        (_trace(meta='"distributedInfo":{"rank":0,"world_size":"NaN"},'), "at `$.world_size`"),
        (_trace(meta='"distributedInfo":{"rank":0,"world_size":NaN},'), "NaN is not JSON"),
        (_trace(kernel=KERNEL.replace('"ts":10', '"ts":NaN')), "NaN is not JSON"),
        (_trace(kernel=KERNEL.replace('"dur":5', '"dur":-Infinity')), "-Infinity is not JSON"),
        (_trace(kernel=KERNEL.replace('"ts":10', '"ts":1e999')), "<= 1e+18 - at `$.ts`"),
        (_trace(kernel=KERNEL.replace('"ts":10', '"ts":"inf"')), "at `$.ts`"),
        (_trace(kernel=KERNEL.replace('"args":{', '"args":{"bytes":"many",')), "at `$.args.bytes`"),
        (
            _trace(kernel=KERNEL.replace('"args":{', '"args":{"x":' + "[" * 1500 + ",")),
            "nested deeper than",
        ),
        (
            _trace(meta='"distributedInfo":{"ra\\udfffnk":0},'),
            "distributedInfo is not what torch.distributed writes",
        ),
    ],
)
def test_hostile_trace_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    result = CliRunner().invoke(app, ["diagnose", "trace", str(path), "--json", "--no-store"])
    assert result.exit_code == 1, result.output
    message = " ".join(result.output.split())
    assert message.startswith(f"error: {path}") and expected in message, message
    assert "Traceback" not in result.output


def test_an_oversized_string_is_called_what_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import slotune.tuner.diagnose._reader as reader

    monkeypatch.setattr(reader, "_CHUNK_CHARS", 1 << 12)
    monkeypatch.setattr(reader, "_MAX_VALUE_CHARS", 1 << 16)  # the 64 MiB bound, scaled down
    path = tmp_path / "t.json"
    path.write_text(_trace(kernel=KERNEL.replace('"name":"k"', '"name":"' + "a" * (1 << 18) + '"')))
    result = CliRunner().invoke(app, ["diagnose", "trace", str(path), "--no-store"])
    message = " ".join(result.output.split())
    assert result.exit_code == 1 and "a string longer than 65,536 characters" in message, message
    assert "truncated" not in message


def test_top_below_zero_is_refused() -> None:
    result = CliRunner().invoke(app, ["diagnose", "trace", str(CUDA_TRACES[0]), "--top", "-1"])
    assert result.exit_code == 2 and "--top" in result.output


def _rocm(event: dict[str, Any]) -> dict[str, Any]:
    """The event as roctracer writes it: HIP names, and numeric args as strings."""
    event = dict(event)
    if event.get("cat") == "cuda_runtime":
        event["cat"] = "hip_runtime"
        event["name"] = event["name"].replace("cuda", "hip", 1)
    args = event.get("args")
    if isinstance(args, dict):
        event["args"] = {
            k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
            for k, v in args.items()
        }
    return event


def _diagnose(path: Path) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["diagnose", "trace", str(path), "--json", "--no-store"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output, parse_constant=_refuse_constant)
    data.pop("source")
    return data


@pytest.mark.parametrize("cuda", CUDA_TRACES, ids=lambda p: p.name)
def test_a_rocm_trace_reads_as_the_same_cuda_trace(tmp_path: Path, cuda: Path) -> None:
    doc = json.loads(gzip.decompress(cuda.read_bytes()))
    doc["traceEvents"] = [_rocm(e) for e in doc["traceEvents"]]
    rocm = tmp_path / "rocm.json"
    rocm.write_text(json.dumps(doc, indent=1))
    assert '"bytes": "' in rocm.read_text()  # what real MI300 traces carry
    assert _diagnose(rocm) == _diagnose(cuda)
