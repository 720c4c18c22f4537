from __future__ import annotations

import sqlite3

import pytest
from _tools import free_port

from slotune.collector.errors import StoreRejected, StoreUnavailable
from slotune.collector.slo import parse_slo
from slotune.collector.store import (
    SampleIn,
    list_slos,
    open_store,
    redact_url,
    save_slos,
    upgrade,
    write_samples,
)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("not a url", "is not a database URL"),
        ("mysql://u:secret@127.0.0.1/db", "'mysql' in mysql://u:***@127.0.0.1/db is not supported"),
        ("sqlite:////no/such/dir/x.db", "no SQLite database at /no/such/dir/x.db"),
    ],
)
def test_bad_urls_say_what_to_use(url: str, problem: str) -> None:
    with pytest.raises(StoreUnavailable) as e:
        open_store(url)
    assert problem in str(e.value)


def test_upgrade_needs_an_existing_directory() -> None:
    with pytest.raises(StoreUnavailable, match="directory /no/such/dir does not exist"):
        upgrade("sqlite:////no/such/dir/x.db")


def test_unreachable_server_hides_the_password() -> None:
    url = f"postgresql+psycopg://slotune:s3cret-pw@127.0.0.1:{free_port()}/slotune"
    with pytest.raises(StoreUnavailable, match="check that the server is running") as e:
        open_store(url)
    assert "s3cret-pw" not in str(e.value)
    assert "slotune:***@127.0.0.1" in str(e.value)


def test_redact_url() -> None:
    assert (
        redact_url("postgresql+psycopg://u:p%40ss@h:5432/d")
        == "postgresql+psycopg://u:***@h:5432/d"
    )
    assert redact_url("sqlite:///x.db") == "sqlite:///x.db"
    assert redact_url("weird://u:pw@host:x:y") == "weird://u:***@host:x:y"


def test_wrong_database_name(pg_server: object) -> None:
    url = pg_server.url("no_such_db")  # type: ignore[attr-defined]
    with pytest.raises(StoreUnavailable) as e:
        open_store(url)
    assert 'database "no_such_db" does not exist' in str(e.value)
    assert "database name in --db" in str(e.value)


def test_locked_sqlite_file_changes_nothing(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    with open_store(sqlite_url) as store:
        save_slos(store, [parse_slo("ttft:p99<=500ms")])
    holder = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with (
            open_store(sqlite_url + "?timeout=0.2") as store,
            pytest.raises(StoreUnavailable, match="locked by another process"),
        ):
            save_slos(store, [parse_slo("ttft:p99<=900ms"), parse_slo("itl:p95<=50ms")])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with open_store(sqlite_url) as store:
        assert [s.spec for s in list_slos(store)] == ["ttft:p99<=500ms"]


def test_server_going_away_and_coming_back(pg_server: object) -> None:
    url = pg_server.create_database("comes_back")  # type: ignore[attr-defined]
    upgrade(url)
    with open_store(url) as store:
        save_slos(store, [parse_slo("e2e:p99<=20s")])
        pg_server.stop()  # type: ignore[attr-defined]
        try:
            with pytest.raises(StoreUnavailable, match="check that the server is running"):
                list_slos(store)
        finally:
            pg_server.start()  # type: ignore[attr-defined]
        assert [s.name for s in list_slos(store)] == ["e2e-p99"]


def test_refused_data_is_told_apart_from_an_outage(store_url: str) -> None:
    # By error code: PostgreSQL's 22001 (value too long), SQLite's SQLITE_CONSTRAINT_NOTNULL.
    upgrade(store_url)
    bad = SampleIn("t", "x" * 300, "gauge", {}, 1.0, 1.0)
    if store_url.startswith("sqlite"):
        bad = SampleIn("t", None, "gauge", {}, 1.0, 1.0)  # type: ignore[arg-type]
    with open_store(store_url) as store:
        with pytest.raises(StoreRejected, match="refused the data"):
            write_samples(store, [bad])
        assert write_samples(store, [SampleIn("t", "ok", "gauge", {}, 1.0, 1.0)]) == 1


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql+psycopg://u@h:1/db?password=SECRETPW",
            "postgresql+psycopg://u@h:1/db?password=***",
        ),
        (
            "postgresql+psycopg://u:pw@h/db?sslpassword=x&application_name=a",
            "postgresql+psycopg://u:***@h/db?application_name=a&sslpassword=***",  # sorted
        ),
        (
            "http://user:PW@host:8000/v1?api_key=k&x=1",
            "http://user:***@host:8000/v1?api_key=***&x=1",
        ),
        ("http://host:8000/metrics?token=t", "http://host:8000/metrics?token=***"),
    ],
)
def test_every_credential_of_a_url_is_masked(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_password_in_the_query_never_reaches_the_message() -> None:
    url = f"postgresql+psycopg://u@127.0.0.1:{free_port()}/db?password=SECRETPW"
    with pytest.raises(StoreUnavailable) as e:
        open_store(url)
    assert "SECRETPW" not in str(e.value) and "password=***" in str(e.value)
