"""Database URLs: the default location, redaction, and engines with the right settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import platformdirs
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from slotune.collector.errors import StoreUnavailable
from slotune.collector.redact import redact_url as redact_any_url

DEFAULT_SQLITE_TIMEOUT_S = 10.0
URL_FORMS = "sqlite:///path/to/slotune.db or postgresql+psycopg://user:password@host:5432/dbname"


def default_db_path() -> Path:
    """The embedded store's file: ``slotune.db`` under the user's data directory."""
    return Path(platformdirs.user_data_dir("slotune")) / "slotune.db"


def default_db_url() -> str:
    """URL of the embedded default store (a SQLite file in the user's data directory)."""
    return f"sqlite:///{default_db_path()}"


def redact_url(url: str | URL) -> str:
    """The URL with its password (userinfo or a credential query parameter such as libpq's
    ``?password=``) masked, safe for logs and error messages."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except (ArgumentError, ValueError):
        return redact_any_url(str(url))
    return redact_any_url(parsed.render_as_string(hide_password=True))


def parse_url(url: str) -> URL:
    """Parse and validate a database URL.

    Raises:
        StoreUnavailable: the text is not a URL of a supported database.
    """
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as e:
        raise StoreUnavailable(f"{redact_url(url)!r} is not a database URL; use {URL_FORMS}") from e
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreUnavailable(
            f"database {parsed.get_backend_name()!r} in {redact_url(parsed)} is not supported; "
            f"use {URL_FORMS}"
        )
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() != "psycopg":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def sqlite_file(url: URL) -> Path | None:
    """The file behind a SQLite URL (None for an in-memory database)."""
    if not url.database or url.database == ":memory:" or url.database.startswith("file:"):
        return None
    return Path(url.database)


def create_store_engine(url: URL) -> Engine:
    """An engine for ``url``; SQLite gets WAL, foreign keys and a busy timeout.

    Raises:
        StoreUnavailable: the driver is missing or the SQLite directory does not exist.
    """
    connect_args: dict[str, Any] = {}
    # A pooled connection may outlive a server restart: test it before use.
    options: dict[str, Any] = {"pool_pre_ping": not is_sqlite(url)}
    if is_sqlite(url):
        path = sqlite_file(url)
        if path is not None and not path.parent.is_dir():
            raise StoreUnavailable(
                f"cannot open the SQLite file {path}: directory {path.parent} does not exist; "
                "create it or pass another --db URL"
            )
        if "timeout" not in url.query:
            connect_args["timeout"] = DEFAULT_SQLITE_TIMEOUT_S
    try:
        engine = create_engine(url, connect_args=connect_args, **options)
    except (ArgumentError, NoSuchModuleError) as e:
        raise StoreUnavailable(
            f"cannot use {redact_url(url)}: {type(e).__name__}; use {URL_FORMS}"
        ) from e
    if is_sqlite(url):
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        # WAL lets the dashboard read while the agent writes; NORMAL sync is safe with WAL.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        # Window queries touch a few pages per series; a larger cache keeps them hot.
        cursor.execute("PRAGMA cache_size=-32768")
    finally:
        cursor.close()
