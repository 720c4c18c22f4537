"""A store that cannot be used: every page says what is wrong and what to do, in one message,
and never shows a Streamlit exception box."""

from __future__ import annotations

import pytest
from _tools import free_port
from ui_pages import RunPage, assert_clean, texts

from slotune.collector.store import schema_status, upgrade

PAGE_NAMES = ("overview", "fleet", "slos", "alerts", "benchmarks", "tuning", "diagnosis")


@pytest.mark.parametrize("page", PAGE_NAMES)
def test_an_empty_store_says_how_to_fill_it(sqlite_url: str, run_page: RunPage, page: str) -> None:
    upgrade(sqlite_url)
    at = run_page(page, sqlite_url)
    assert_clean(at)
    assert "slotune" in texts(at) or at.form, page  # each empty page names the command to run


@pytest.mark.parametrize("page", PAGE_NAMES)
def test_an_older_schema_asks_for_db_upgrade_and_changes_nothing(
    sqlite_url: str, run_page: RunPage, page: str
) -> None:
    upgrade(sqlite_url, "0001")
    at = run_page(page, sqlite_url)
    assert not at.exception
    assert len(at.error) == 1, page
    # the message is shown as plain text: its markdown characters arrive escaped
    assert "run \\`slotune db upgrade\\`" in at.error[0].value
    assert schema_status(sqlite_url).current == "0001"


@pytest.mark.parametrize("page", PAGE_NAMES)
def test_an_unreachable_postgresql_is_one_message(run_page: RunPage, page: str) -> None:
    url = f"postgresql+psycopg://slotune:secret-pw@127.0.0.1:{free_port()}/slotune"
    at = run_page(page, url)
    assert not at.exception
    assert len(at.error) == 1, page
    message = at.error[0].value
    assert "cannot connect to the database" in message
    assert "check that the server is running" in message
    assert "secret-pw" not in message


def test_a_missing_sqlite_file_is_one_message(run_page: RunPage, tmp_path: object) -> None:
    at = run_page("overview", f"sqlite:///{tmp_path}/nope.db")
    assert not at.exception
    assert "no SQLite database at" in at.error[0].value
