"""``slotune route`` as a user runs it: a bad file is one line; a good one serves until SIGTERM."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
from _tools import SLOTUNE, free_port
from route_helpers import engines, fleet_yaml


def test_a_bad_fleet_file_is_one_line_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("policy: least-requests\nbackends:\n  - {url: http://h:1, modle: m}\n")
    r = subprocess.run(
        [SLOTUNE, "route", "--config", str(path)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        f"error: {path}:3: unknown field 'modle' in backends[0]; allowed: url, pool, model, "
        "kind, name"
    ]


def test_a_binary_fleet_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x01" * 64)
    r = subprocess.run(
        [SLOTUNE, "route", "--config", str(path)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}: ") and "not UTF-8" in line


def test_a_port_out_of_range_is_refused_before_reading_the_file(tmp_path: Path) -> None:
    for port in ("-1", "65536"):
        r = subprocess.run(
            [SLOTUNE, "route", "--config", str(tmp_path / "absent.yaml"), "--port", port],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2
        assert "Invalid value for '--port'" in r.stderr
        assert "Traceback" not in r.stderr


def test_route_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    with engines(1, speedup=20) as [engine]:
        path = tmp_path / "fleet.yaml"
        path.write_text(fleet_yaml([engine.url]))
        port = free_port()
        proc = subprocess.Popen(
            [SLOTUNE, "route", "--config", str(path), "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if "Starting slotune route on http://127.0.0.1:" in line:
                    break
            else:
                raise AssertionError("slotune route did not start")
            r = httpx.post(
                f"http://127.0.0.1:{port}/v1/completions",
                json={"prompt": "hello", "max_tokens": 3},
                timeout=30,
            )
            assert r.status_code == 200
            assert r.json()["usage"]["completion_tokens"] == 3
        finally:
            proc.terminate()
            out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert "Traceback" not in out
