"""End to end: `slotune ui` as a process, every page in a real headless Chromium.

Each page is opened by its URL path, waited on until the app has finished running, and must
show its title and neither an exception nor an error. The screenshots go to the test's
temporary directory, and also to ``SLOTUNE_SCREENSHOTS`` when set (the README's pictures come
from ``SLOTUNE_SCREENSHOTS=docs/img``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from _tools import SLOTUNE, free_port, missing_tool
from ui_seed import seed

CHROMIUM = "/usr/bin/chromium"
PAGES = {
    "": "Overview",
    "fleet": "Fleet",
    "slos": "SLOs",
    "alerts": "Alerts",
    "benchmarks": "Benchmarks",
    "tuning": "Tuning",
    "diagnosis": "Diagnosis",
    "fleet-plan": "Fleet plans",
}
README_SHOTS = {"": "overview.png", "fleet": "fleet.png", "tuning": "tuning.png"}


@pytest.fixture
def dashboard(sqlite_url: str, tmp_path: Path) -> Iterator[str]:
    seed(sqlite_url)
    subprocess.run(
        [
            SLOTUNE,
            "--db",
            sqlite_url,
            "tune",
            "--backend",
            "sim",
            "--workload",
            "azure-conv",
            "--slo",
            "ttft:p99<=500ms",
            "--slo",
            "itl:p99<=50ms",
            "--trials",
            "6",
            "--num-requests",
            "150",
            "--recheck",
            "0",
            "--study",
            "chat-h100",
        ],
        check=True,
        capture_output=True,
        timeout=240,
    )
    port = free_port()
    log = (tmp_path / "ui.log").open("w")
    proc = subprocess.Popen(
        [SLOTUNE, "--db", sqlite_url, "ui", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            raise AssertionError((tmp_path / "ui.log").read_text())
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.mark.slow
def test_every_page_renders_in_chromium(dashboard: str, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        missing_tool("chromium", "chromium")
    from playwright.sync_api import sync_playwright

    out = os.environ.get("SLOTUNE_SCREENSHOTS")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            # the dashboard works offline: every request (the page icon included) is its own
            outside: list[str] = []
            page.on(
                "request", lambda r: None if r.url.startswith(dashboard) else outside.append(r.url)
            )
            for path, title in PAGES.items():
                page.goto(f"{dashboard}/{path}")
                page.wait_for_selector("h1", timeout=60_000)
                page.wait_for_selector(
                    '[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=60_000
                )
                page.wait_for_timeout(1500)  # charts draw after the script ends
                body = page.locator("body").inner_text()
                assert page.locator("h1").first.inner_text().strip() == title, body[:2000]
                assert page.locator('[data-testid="stException"]').count() == 0, body[:2000]
                assert page.locator('[data-testid="stAlertContentError"]').count() == 0, body[:2000]
                assert "Traceback" not in body, body[:2000]
                shot = tmp_path / (README_SHOTS.get(path) or f"{path}.png")
                page.screenshot(path=str(shot), full_page=True)
                if out and path in README_SHOTS:
                    shutil.copy(shot, Path(out) / README_SHOTS[path])
            assert outside == [], outside
        finally:
            browser.close()
