"""Page tests: a seeded store, and each page run with Streamlit's AppTest against it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest
from ui_pages import PAGES, RunPage
from ui_seed import seed


@pytest.fixture
def seeded_url(store_url: str) -> str:
    """A store (SQLite and PostgreSQL) holding targets, samples, SLOs, alerts, runs."""
    seed(store_url)
    return store_url


@pytest.fixture
def run_page(monkeypatch: pytest.MonkeyPatch) -> Iterator[RunPage]:
    """Run one page file on a store URL: ``run_page("fleet", url, read_only=False, query={})``."""

    def run(
        page: str,
        url: str,
        *,
        read_only: bool = False,
        query: dict[str, str] | None = None,
    ) -> AppTest:
        monkeypatch.setenv("SLOTUNE_DB", url)
        monkeypatch.setenv("SLOTUNE_UI_READ_ONLY", "1" if read_only else "0")
        at = AppTest.from_file(str(PAGES / f"{page}.py"), default_timeout=120)
        for key, value in (query or {}).items():
            at.query_params[key] = value
        return at.run()

    yield run
    from slotune.ui.app._common import _store

    _store.clear()  # disposes every store the pages opened
