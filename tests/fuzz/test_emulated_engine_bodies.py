"""The emulated engine answers a hostile request body with HTTP 400, never a 500."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from _tools import running_emulator


@pytest.mark.parametrize(
    "body",
    [b"[" * 100_000, b'{"prompt": "a", "max_tokens": ' + b"9" * 5000 + b"}", b"\xff\xfe\x00"],
)
def test_hostile_json_bodies_are_bad_requests(tmp_path: Path, body: bytes) -> None:
    with running_emulator(tmp_path / "timings.jsonl", speedup=50.0) as url:
        request = urllib.request.Request(
            f"{url}/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(request, timeout=30)
        with e.value:
            assert e.value.code == 400
