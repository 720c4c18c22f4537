"""Opening the store: engine, schema check, sessions, and the one place DB errors are translated."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from slotune.collector.errors import StoreError, StoreRejected, StoreUnavailable
from slotune.collector.store import _migrate
from slotune.collector.store._codes import Failure, classify
from slotune.collector.store._url import (
    create_store_engine,
    default_db_path,
    default_db_url,
    is_sqlite,
    parse_url,
    redact_url,
    sqlite_file,
)

# How the writer's cache names a series: (target, metric name, sorted label items).
SeriesKey = tuple[str, str, tuple[tuple[str, str], ...]]


# The writer's fast path names a series by (target, metric name, id of the labels object):
# agents share one labels dict among every sample of a series, so this skips sorting labels.
FastKey = tuple[str, str, int]


@dataclass
class SeriesCache:
    """Per-store memory of series ids and of the last value of each cumulative series.

    ``by_labels_obj`` maps a :data:`FastKey` to (the labels object, a copy of it, the series
    id): holding the object keeps its id from being reused, and the copy catches a labels
    dict changed in place since.
    """

    ids: dict[SeriesKey, int] = field(default_factory=dict)
    by_labels_obj: dict[FastKey, tuple[Mapping[str, str], dict[str, str], int]] = field(
        default_factory=dict
    )
    cumulative: set[int] = field(default_factory=set)
    last: dict[int, tuple[float, float]] = field(default_factory=dict)
    targets: dict[str, int] = field(default_factory=dict)
    target_of: dict[int, int] = field(default_factory=dict)

    def clear(self) -> None:
        self.ids.clear()
        self.by_labels_obj.clear()
        self.cumulative.clear()
        self.last.clear()
        self.targets.clear()
        self.target_of.clear()


class Store:
    """An open database. Get one from :func:`open_store`; ``with open_store() as store:``
    disposes it at the end."""

    def __init__(self, engine: Engine, url: URL) -> None:
        self.engine = engine
        self.url = redact_url(url)
        self.is_sqlite = is_sqlite(url)
        self.cache = SeriesCache()
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits on success and rolls back on any error."""
        with translate_errors(self.url), self._sessions() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection inside one transaction (for bulk statements)."""
        with translate_errors(self.url), self.engine.begin() as conn:
            yield conn

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.dispose()

    def __repr__(self) -> str:
        return f"Store({self.url})"


@contextmanager
def translate_errors(url: str) -> Iterator[None]:
    """Turn driver errors into the StoreError kind its error code means, naming the fix."""
    try:
        yield
    except DBAPIError as e:
        failure = classify(e.orig, is_operational=isinstance(e, OperationalError))
        message = _explain(failure, _first_line(e.orig).replace("\n", " "), url)
        if failure is Failure.REJECTED:
            raise StoreRejected(message) from e
        if failure is Failure.OTHER:
            raise StoreError(message) from e
        raise StoreUnavailable(message) from e
    except SQLAlchemyError as e:
        raise StoreError(f"{url}: {type(e).__name__}: {_first_line(e)}") from e


def _first_line(e: object) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def _explain(failure: Failure, msg: str, url: str) -> str:
    match failure:
        case Failure.LOCKED:
            return (
                f"the database {url} is locked by another process ({msg}); stop the other "
                "writer or retry later (PostgreSQL serves concurrent writers)"
            )
        case Failure.CANNOT_OPEN:
            return (
                f"cannot write the SQLite file of {url} ({msg}); check the path and its "
                "permissions, or pass another --db URL"
            )
        case Failure.NOT_A_DATABASE:
            return f"{url} is not a usable SQLite database file ({msg}); pass the right --db URL"
        case Failure.LOGIN:
            return (
                f"PostgreSQL refused the login for {url} ({msg}); "
                "fix the user/password in --db or SLOTUNE_DB"
            )
        case Failure.NO_DATABASE:
            return (
                f"the PostgreSQL database of {url} does not exist ({msg}); create it "
                "(createdb) or fix the database name in --db"
            )
        case Failure.REJECTED:
            return f"the database at {url} refused the data ({msg}); retrying cannot help"
        case Failure.OTHER:
            return (
                f"{url}: the database refused the operation ({msg}); check the schema with "
                "`slotune db current`"
            )
    return (
        f"cannot connect to the database at {url} ({msg}); check that the server is "
        "running, and the host, port, user, password and database name in --db or SLOTUNE_DB"
    )


def _resolve(url: str | None) -> tuple[URL, bool]:
    """The parsed URL and whether it is the default embedded store."""
    if url is None:
        default_db_path().parent.mkdir(parents=True, exist_ok=True)
        return parse_url(default_db_url()), True
    return parse_url(url), False


def open_store(url: str | None = None, *, check_schema: bool = True) -> Store:
    """Connect to the store and check its schema revision.

    The default embedded store (``url`` None) is created and upgraded on first use; any other
    database must be upgraded explicitly with ``slotune db upgrade``.

    Args:
        url: SQLAlchemy URL (``sqlite:///file.db`` or ``postgresql+psycopg://...``);
            None for the SQLite file in the user's data directory.
        check_schema: refuse a schema older or newer than this slotune knows.

    Raises:
        StoreUnavailable: wrong or unreachable URL, locked SQLite file.
        SchemaMismatch: the schema needs ``slotune db upgrade`` (or a newer slotune).
    """
    parsed, is_default = _resolve(url)
    if not is_default:
        _require_sqlite_file(parsed)
    engine = create_store_engine(parsed)
    store = Store(engine, parsed)
    try:
        with store.connection() as conn:
            conn.execute(text("SELECT 1"))
            if (
                is_default
                and _migrate.revision_of(conn) is None
                and not _migrate.has_slotune_tables(conn)
            ):
                _migrate.upgrade_connection(conn)
            elif check_schema:
                _migrate.check_revision(conn)
    except BaseException:
        engine.dispose()
        raise
    return store


def _open_unchecked(url: str | None, *, must_exist: bool = False) -> Store:
    parsed, is_default = _resolve(url)
    if must_exist and not is_default:
        _require_sqlite_file(parsed)
    return Store(create_store_engine(parsed), parsed)


def _require_sqlite_file(url: URL) -> None:
    # Connecting would silently create an empty file where the user mistyped a path.
    path = sqlite_file(url) if is_sqlite(url) else None
    if path is not None and not path.exists():
        raise StoreUnavailable(
            f"no SQLite database at {path}; create it with `slotune --db 'sqlite:///{path}' "
            "db upgrade` or fix the path"
        )


def upgrade(url: str | None = None, revision: str = "head") -> str:
    """Apply migrations up to ``revision`` (creating the default SQLite file if needed).

    Returns:
        The revision the database is at afterwards.

    Raises:
        StoreUnavailable: the database cannot be reached.
        SchemaMismatch: the database is newer than this slotune.
    """
    store = _open_unchecked(url)
    try:
        with store.connection() as conn:
            current = _migrate.revision_of(conn)
            if current is not None and current not in _migrate.known_revisions():
                _migrate.check_revision(conn)
            _migrate.upgrade_connection(conn, revision)
            return _migrate.revision_of(conn) or ""
    finally:
        store.dispose()


def downgrade(url: str | None, revision: str) -> str | None:
    """Revert migrations down to ``revision`` (``base`` removes every slotune table)."""
    store = _open_unchecked(url)
    try:
        with store.connection() as conn:
            _migrate.downgrade_connection(conn, revision)
            return _migrate.revision_of(conn)
    finally:
        store.dispose()


@dataclass(frozen=True, slots=True)
class RevisionInfo:
    """Where a database's schema stands against this slotune."""

    url: str
    current: str | None
    head: str

    @property
    def is_current(self) -> bool:
        return self.current == self.head

    def to_dict(self) -> dict[str, object]:
        return {
            "url": self.url,
            "current": self.current,
            "head": self.head,
            "up_to_date": self.is_current,
        }


def schema_status(url: str | None = None) -> RevisionInfo:
    """The schema revision of the database and the one this slotune expects."""
    store = _open_unchecked(url, must_exist=True)
    try:
        with store.connection() as conn:
            return RevisionInfo(store.url, _migrate.revision_of(conn), _migrate.head_revision())
    finally:
        store.dispose()


def current_revision(url: str | None = None) -> str | None:
    """The schema revision stamped in the database (None before the first upgrade)."""
    return schema_status(url).current
