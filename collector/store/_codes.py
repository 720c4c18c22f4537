"""What a database error means, read from its code rather than its message.

PostgreSQL errors carry an SQLSTATE (psycopg ``sqlstate``); SQLite errors carry an extended
result-code name (``sqlite_errorname``). Only a failure to connect carries neither (libpq
reports it as text), and that is always a store that cannot be reached.
"""

from __future__ import annotations

from enum import StrEnum


class Failure(StrEnum):
    """What went wrong, as far as a caller must act on it."""

    UNREACHABLE = "unreachable"  # no connection: retry later
    LOCKED = "locked"  # SQLite file locked by another writer: retry later
    CANNOT_OPEN = "cannot_open"  # SQLite file missing, unreadable or read-only
    NOT_A_DATABASE = "not_a_database"  # the SQLite file is something else
    LOGIN = "login"  # PostgreSQL refused the credentials
    NO_DATABASE = "no_database"  # the PostgreSQL database does not exist
    REJECTED = "rejected"  # the data itself was refused: retrying cannot help
    OTHER = "other"  # schema or statement problems


# SQLSTATE classes (first two characters) and codes, per the PostgreSQL manual, appendix A.
_PG_CLASSES = {
    "08": Failure.UNREACHABLE,  # connection exception
    "53": Failure.UNREACHABLE,  # insufficient resources (disk full, too many connections)
    "57": Failure.UNREACHABLE,  # operator intervention (shutdown, cancelled)
    "58": Failure.UNREACHABLE,  # system error (I/O)
    "40": Failure.UNREACHABLE,  # transaction rollback (serialization failure, deadlock)
    "28": Failure.LOGIN,  # invalid authorization specification
    "3D": Failure.NO_DATABASE,  # invalid catalog name
    "22": Failure.REJECTED,  # data exception (too long, out of range, bad encoding)
    "23": Failure.REJECTED,  # integrity constraint violation
    "54": Failure.REJECTED,  # program limit exceeded (row or index entry too large)
}
_PG_CODES = {"55P03": Failure.LOCKED}  # lock not available

# SQLite primary result codes (an extended name starts with its primary one).
_SQLITE_PRIMARY = {
    "SQLITE_BUSY": Failure.LOCKED,
    "SQLITE_LOCKED": Failure.LOCKED,
    "SQLITE_CANTOPEN": Failure.CANNOT_OPEN,
    "SQLITE_READONLY": Failure.CANNOT_OPEN,
    "SQLITE_PERM": Failure.CANNOT_OPEN,
    "SQLITE_AUTH": Failure.CANNOT_OPEN,
    "SQLITE_NOTADB": Failure.NOT_A_DATABASE,
    "SQLITE_CORRUPT": Failure.NOT_A_DATABASE,
    "SQLITE_IOERR": Failure.UNREACHABLE,
    "SQLITE_FULL": Failure.UNREACHABLE,
    "SQLITE_NOMEM": Failure.UNREACHABLE,
    "SQLITE_PROTOCOL": Failure.UNREACHABLE,
    "SQLITE_INTERRUPT": Failure.UNREACHABLE,
    "SQLITE_CONSTRAINT": Failure.REJECTED,
    "SQLITE_TOOBIG": Failure.REJECTED,
    "SQLITE_MISMATCH": Failure.REJECTED,
    "SQLITE_RANGE": Failure.REJECTED,
}


def classify(driver_error: BaseException | None, *, is_operational: bool) -> Failure:
    """What a DB-API error means.

    Args:
        driver_error: the driver's exception (SQLAlchemy's ``e.orig``).
        is_operational: SQLAlchemy raised it as an ``OperationalError``.
    """
    sqlstate = getattr(driver_error, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate:
        return _PG_CODES.get(sqlstate) or _PG_CLASSES.get(sqlstate[:2], Failure.OTHER)
    name = getattr(driver_error, "sqlite_errorname", None)
    if isinstance(name, str) and name:
        for primary, failure in _SQLITE_PRIMARY.items():
            if name == primary or name.startswith(primary + "_"):
                return failure
        return Failure.OTHER
    # No code: libpq failed before any server answer (refused, timed out, unknown host).
    return Failure.UNREACHABLE if is_operational else Failure.OTHER
