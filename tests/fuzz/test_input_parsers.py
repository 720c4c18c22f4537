"""What users and servers hand the collector, fed hostile input: only the module's documented
error type escapes (SSE: ProtocolError; traces, YAML files and flags: ConfigError)."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from strategies import DEEP_JSON, FUZZ, JSON_VALUES, json_text

from slotune.collector.agent.targets import load_targets_file, parse_target_arg
from slotune.collector.bench.sse import ProtocolError, SSEDecoder, parse_chunk
from slotune.collector.durations import parse_duration_s
from slotune.collector.errors import ConfigError
from slotune.collector.slo import parse_slo, parse_slo_yaml
from slotune.collector.workload.synthetic import parse_length_spec
from slotune.collector.workload.traces import load_trace

SSE_PIECES = st.sampled_from(
    [b"data: ", b"data:", b"\n", b"\r\n", b"\r", b": keep-alive\n", b"event: x\n", b"[DONE]"]
)


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    parts = draw(
        st.lists(
            SSE_PIECES
            | JSON_VALUES.map(lambda v: json_text(v).encode())
            | DEEP_JSON.map(str.encode)
            | st.binary(max_size=20),
            max_size=30,
        )
    )
    return b"".join(parts)


def _events(data: bytes, cuts: list[int]) -> list[str]:
    decoder = SSEDecoder()
    events: list[str] = []
    start = 0
    for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
        events += decoder.feed(data[start:cut])
        start = max(start, cut)
    return events + decoder.close()


@FUZZ
@given(sse_streams(), st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_sse_split_anywhere_gives_the_same_events_and_only_protocol_errors(
    data: bytes, cuts: list[int]
) -> None:
    events = _events(data, cuts)
    assert events == _events(data, [])
    for payload in events:
        if payload.strip() == "[DONE]":
            continue
        with contextlib.suppress(ProtocolError):
            parse_chunk(payload)


TRACE_LINES = st.one_of(
    JSON_VALUES.map(json_text),
    st.fixed_dictionaries(
        {
            "timestamp": JSON_VALUES,
            "input_tokens": JSON_VALUES,
            "output_tokens": JSON_VALUES,
        },
        optional={"hash_ids": JSON_VALUES, "block_size": JSON_VALUES, "session_id": JSON_VALUES},
    ).map(json_text),
    st.builds(
        lambda ts, a, b: f"{ts},{a},{b}",
        st.sampled_from(["2023-11-16 18:17:03.1", "nan", "", "2023-13-45 99:99:99"]),
        st.sampled_from(["1", "-3", "0", "1e30", "x", "9" * 400]),
        st.sampled_from(["1", "-3", "0", "nan"]),
    ),
    DEEP_JSON,
    st.text(max_size=30),
)


@FUZZ
@given(
    st.sampled_from(["", "TIMESTAMP,ContextTokens,GeneratedTokens\n"]),
    st.lists(TRACE_LINES, min_size=1, max_size=8),
    st.binary(max_size=8),
)
def test_trace_readers(header: str, lines: list[str], tail: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.txt"
        path.write_bytes((header + "\n".join(lines)).encode() + tail)
        try:
            trace = load_trace(path)
        except ConfigError:
            return
    assert all(0 <= r.timestamp_s < 1e11 for r in trace.requests)


YAML_TEXT = st.one_of(
    st.text(max_size=80),
    DEEP_JSON,
    JSON_VALUES.map(json_text),  # JSON is YAML
    st.builds(
        "targets:\n  - kind: {}\n    url: {}\n    interval: {}\n    labels: {}\n".format,
        st.sampled_from(["vllm", "nvml", "dcgm", "zz", "[]"]),
        st.sampled_from(["http://h:1", "http://[/x]", "notaurl", "{}", "http://u:p@h:1"]),
        st.sampled_from(["5s", "nan", "-1s", "0", "1e999s", "[]"]),
        st.sampled_from(["{}", "{a: 1}", "[]", "x"]),
    ),
    st.builds(
        "slos:\n  - sli: {}\n    threshold: {}\n    objective: {}\n    window: {}\n".format,
        st.sampled_from(["ttft", "itl", "error_rate", "zz"]),
        st.sampled_from(["500ms", "1e41s", "nan", "-1s", "[]"]),
        st.sampled_from(["0.99", "1.5", "nan", "x"]),
        st.sampled_from(["30d", "0s", "99999999999999999999d", "nan"]),
    ),
)


@FUZZ
@given(YAML_TEXT, st.binary(max_size=6))
def test_targets_files(text: str, tail: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "targets.yaml"
        path.write_bytes(text.encode() + tail)
        with contextlib.suppress(ConfigError):
            load_targets_file(path, node="n")


@FUZZ
@given(YAML_TEXT)
def test_slo_files(text: str) -> None:
    with contextlib.suppress(ConfigError):
        parse_slo_yaml(text)


FLAG_TEXT = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        [
            "nan",
            "inf",
            "-inf",
            "1e999",
            "9" * 400,
            "-1",
            "0",
            "1e30",
            "normal:nan,1",
            "lognormal:1000,10",
            "uniform:1,1e30",
            "empirical:",
            "ttft:p99<=1e41s",
            "ttft:p99<=nanms",
            "error_rate<=1e999%",
            "vllm=http://[/x]",
            "vllm=",
            "=",
        ]
    ),
)


@FUZZ
@given(FLAG_TEXT)
def test_command_line_values(text: str) -> None:
    for parse in (
        lambda t: parse_duration_s(t, field_name="--interval"),
        parse_length_spec,
        parse_slo,
        lambda t: parse_target_arg(t, node="n"),
    ):
        with contextlib.suppress(ConfigError):
            parse(text)


PROFILER_NUMBERS = st.sampled_from(
    [
        "1",
        "-1",
        "1.5",
        "NaN",
        "Infinity",
        "1e999",
        "9" * 5000,
        "9223372036854775808",
        '"7"',
        '"x"',
        '"NaN"',
        "[" * 1500 + "]" * 1500,
        '"\\ud800"',
        "true",
        "null",
        "{}",
    ]
)


@st.composite
def profiler_traces(draw: st.DrawFn) -> str:
    def event(cat: str, name: str) -> str:
        fields = {
            k: draw(PROFILER_NUMBERS) for k in ("ts", "dur", "correlation", "device", "bytes")
        }
        return (
            f'{{"ph":"X","cat":"{cat}","name":"{name}","pid":0,"ts":{fields["ts"]},'
            f'"dur":{fields["dur"]},"args":{{"correlation":{fields["correlation"]},'
            f'"device":{fields["device"]},"bytes":{fields["bytes"]}}}}}'
        )

    events = [
        event(*draw(st.sampled_from([("kernel", "gemm"), ("hip_runtime", "hipLaunchKernel")])))
        for _ in range(draw(st.integers(1, 4)))
    ]
    meta = f'"distributedInfo":{{"rank":{draw(PROFILER_NUMBERS)},"world_size":1}},'
    return '{"schemaVersion":1,' + meta + '"traceEvents":[\n' + ",\n".join(events) + "\n]}"


@FUZZ
@given(profiler_traces() | JSON_VALUES.map(json_text) | DEEP_JSON)
def test_profiler_traces_are_diagnosed_as_strict_json_or_refused(text: str) -> None:
    from slotune.tuner.diagnose import diagnose_trace

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.json"
        path.write_text(text, errors="surrogatepass")
        try:
            result = diagnose_trace(path)
        except ConfigError:
            return
    json.dumps(result.to_dict(), allow_nan=False)  # --json prints strict JSON


SLO_DOCUMENTS = st.one_of(
    YAML_TEXT,
    st.builds(
        "version: prometheus/v1\nservice: s\nslos:\n  - name: {}\n    objective: {}\n"
        "    sli:\n      events:\n        error_query: {}\n".format,
        st.sampled_from(["a", "", "[]", "!!int 0xzz"]),
        st.sampled_from(["99.9", "100", "nan", "!!float abc", "'99'"]),
        st.sampled_from(
            [
                'sum(rate(vllm:request_success_total{finished_reason="abort"}[5m]))',
                'vllm:e2e_request_latency_seconds_bucket{le="abc"}',
                "up",
                "{}",
            ]
        ),
    ),
    st.builds(
        "apiVersion: pyrra.dev/v1alpha1\nkind: ServiceLevelObjective\nmetadata: {{name: a}}\n"
        "spec:\n  target: {}\n  window: {}\n  indicator: {}\n".format,
        st.sampled_from(["'99'", "0", "!!timestamp notatime", "[]"]),
        st.sampled_from(["2w", "0s", "nan", "{}"]),
        st.sampled_from(
            [
                '{latency: {success: {metric: vllm:time_to_first_token_seconds_bucket{le="0.5"}}}}',
                "{ratio: {errors: {metric: up}}}",
                "{bool_gauge: {}}",
                "[]",
            ]
        ),
    ),
)


@FUZZ
@given(SLO_DOCUMENTS, st.binary(max_size=4))
def test_slo_documents_of_every_format(text: str, tail: bytes) -> None:
    from slotune.collector.alerts.slo_files import load_slo_documents

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "slos.yaml"
        path.write_bytes(text.encode() + tail)
        with contextlib.suppress(ConfigError):
            load_slo_documents(path)
