"""Shared fixtures: a real PostgreSQL server, fresh databases, and the CI rule on skips.

- ``pg_server`` (session): PostgreSQL started with ``initdb`` / ``pg_ctl`` on a free port in a
  temporary directory (as user ``postgres`` through ``runuser`` when running as root, since
  ``initdb`` refuses root). ``.url(dbname)``, ``.create_database(name)``, ``.stop()``,
  ``.start()``.
- ``pg_url``: a fresh empty database per test; ``sqlite_url``: a fresh SQLite file per test;
  ``store_url``: both, as a parametrized fixture.
- With ``CI=true`` any skipped test fails the run (the tests need every tool in CI).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from _tools import free_port, in_ci, require_binary

PG_BIN_GLOBS = ("/usr/lib/postgresql/*/bin",)


class PostgresServer:
    """A throw-away PostgreSQL cluster on 127.0.0.1 with trust authentication."""

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin_dir = bin_dir
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.user = "postgres"
        self._names = itertools.count(1)

    def _run(self, *args: str) -> None:
        cmd = [str(self.bin_dir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, user="postgres")
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            self.user,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )

    def start(self) -> None:
        # Durability settings off: a test cluster trades crash safety for speed.
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database and return its URL."""
        name = name or f"test_{next(self._names)}"
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=self.user, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    initdb = require_binary("initdb", "postgresql", PG_BIN_GLOBS)
    root = Path(tempfile.mkdtemp(prefix="slotune-pg-"))
    server = PostgresServer(Path(initdb).parent, root)
    try:
        server.init()
        server.start()
    except subprocess.CalledProcessError as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"PostgreSQL did not start: {e.stderr.decode(errors='replace')[-2000:]}")
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # a test stopped it
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> str:
    """A fresh empty PostgreSQL database for this test."""
    return pg_server.create_database()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file URL in this test's temporary directory (the file does not exist yet)."""
    return f"sqlite:///{tmp_path / 'slotune.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    """A fresh database URL, once on SQLite and once on PostgreSQL."""
    return str(request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url"))


# --- CI: a skip is a failure ------------------------------------------------------------

_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append(f"{report.nodeid}: {reason}")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:
        _skipped.append(f"{report.nodeid}: skipped at collection")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if in_ci() and _skipped and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if in_ci() and _skipped:
        terminalreporter.section("skipped tests fail the run in CI (CI=true)", red=True)
        for line in _skipped:
            terminalreporter.write_line(line)
