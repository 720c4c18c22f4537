"""Hostile inputs: text built from the pieces parsers look for, mixed with noise."""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ = settings(
    max_examples=int(os.environ.get("SLOTUNE_FUZZ_EXAMPLES", "40")),
    deadline=None,  # no timed assertions: a loaded machine must not fail a property
    database=None,  # nothing written into the working tree
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=os.environ.get("CI") == "true",  # reproducible in CI, searching locally
)

NUMBERS = st.sampled_from(
    ["0", "1", "-1", "1.5", "NaN", "+Inf", "-Inf", "1e999", "-1e999", "9" * 400, "0x10", "", "abc"]
)
NAMES = st.one_of(
    st.sampled_from(
        [
            "vllm:num_requests_waiting",
            "vllm:time_to_first_token_seconds_bucket",
            "vllm:time_to_first_token_seconds_count",
            "DCGM_FI_DEV_FB_USED",
            "sglang:num_running_reqs",
            "trtllm_kv_cache_utilization",
            "x" * 300,
        ]
    ),
    st.text(min_size=1, max_size=20),
)
LABEL_VALUES = st.one_of(
    st.sampled_from(["abc", "+Inf", "0.1", "", "\\", '"', "\\n", "p" * 2000]), st.text(max_size=10)
)


@st.composite
def exposition_lines(draw: st.DrawFn) -> str:
    name = draw(NAMES)
    kind = draw(st.sampled_from(["sample", "type", "help", "noise", "eof"]))
    if kind == "type":
        t = draw(st.sampled_from(["counter", "gauge", "histogram", "summary", "untyped", "zz"]))
        return f"# TYPE {name.removesuffix('_bucket')} {t}"
    if kind == "help":
        return f"# HELP {name} {draw(st.text(max_size=10))}"
    if kind == "noise":
        return draw(st.text(max_size=40))
    if kind == "eof":
        return "# EOF"
    labels = draw(
        st.dictionaries(
            st.sampled_from(["le", "model_name", "gpu", "quantile", "x"]), LABEL_VALUES, max_size=3
        )
    )
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{body}}} {draw(NUMBERS)}" + draw(st.sampled_from(["", " 123", " abc"]))


EXPOSITIONS = st.lists(exposition_lines(), max_size=30).map("\n".join)

JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**400), max_value=10**400),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
    ),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "iter",
                    "kvCacheStats",
                    "usedNumBlocks",
                    "iterLatencyMS",
                    "x",
                    "choices",
                    "usage",
                    "text",
                    "error",
                    "code",
                    "completion_tokens",
                    "delta",
                    "content",
                    "finish_reason",
                    "token_ids",
                    "logprobs",
                ]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


def json_text(value: object) -> str:
    """JSON the way a lax server writes it (NaN and Infinity included)."""
    return json.dumps(value)


DEEP_JSON = st.integers(min_value=1, max_value=3_000).map(lambda n: "[" * n + "]" * (n % 7))
