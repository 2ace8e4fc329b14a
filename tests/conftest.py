"""Real PostgreSQL for every test: DATABASE_URL when set, else an embedded server.

Each test gets its own database cloned from a migrated template (fast, isolated).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from email import message_from_bytes
from email.message import EmailMessage
from email.policy import default
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psycopg
import pytest
from hypothesis import settings
from psycopg.conninfo import make_conninfo

from payhooks.operations.deliverylog import DeliveryLog
from payhooks.plumbing import db
from payhooks.service import database
from payhooks.service.config import Settings
from payhooks.service.web import create_app
from payhooks.sim.loopback import served
from payhooks.sim.proxy import Proxy
from tests import loopback

# No timing thresholds in tests: hypothesis's default 200 ms deadline per example fails a
# correct property on a busy two-core machine (CI runs two workers). Examples stay bounded by
# their count.
settings.register_profile("payhooks", deadline=None)
settings.load_profile("payhooks")

T = TypeVar("T")
R = TypeVar("R")


UNDURABLE = ("fsync", "full_page_writes")
"""What the embedded test cluster does without: nothing a test checks rests on a crash of the
machine. Commits still write their WAL before they return (``synchronous_commit`` stays on),
so a server the fault tests kill loses nothing it acknowledged: the operating system keeps it."""


# The longest tests are collected first, and handed out a few at a time in that order
# (pytest-xdist's `load` gave each worker a first chunk of a sixteenth of the suite: one worker
# took every long test in a row): a long test started last keeps one worker busy after the
# others have finished. Within each group, and after them, tests keep their collection order.
FIRST = (
    "tests/acceptance/test_cli_install.py",  # the wheel built, clean venvs and pip install
    "tests/acceptance/test_bare_install.py",
    "tests/acceptance/test_wheel.py",
    "tests/scaleout/",  # hosts in network namespaces, PgBouncer
    "tests/acceptance/test_storm.py",
    "tests/acceptance/test_demo.py",
    "tests/relay/test_relay.py",  # one unit with the examples, about 30 s on one worker
    "tests/relay/test_examples.py",
    "tests/console/test_console_browser.py",  # Chromium
    "tests/fastapi/test_fastapi_console_browser.py",
    "tests/acceptance/",  # `payhooks` commands as subprocesses
)


# Modules whose module-scoped fixture is costly (a clean venv, the demo, a broker, PgBouncer's
# site): each goes to one worker whole, its fixture made once; every other test is handed out on
# its own. (xdist's own `xdist_group` marks are lost under pytest 9.2's node ids.)
WHOLE = (
    "tests/acceptance/test_bare_install.py",
    "tests/acceptance/test_cli_install.py",
    "tests/acceptance/test_demo.py",
    "tests/acceptance/test_wheel.py",
    "tests/scaleout/test_pgbouncer.py",
)
# Modules sharing one costly fixture of wider scope: all go to one worker, in one unit. The
# relay's tests and its examples share a RabbitMQ node and a NATS server (tests/relay/conftest.py;
# a RabbitMQ node takes about 7 s and 5 s of CPU to start).
TOGETHER = {
    "tests/relay/test_examples.py": "tests/relay/",
    "tests/relay/test_relay.py": "tests/relay/",
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Tests handed out in collection order (pyproject: --no-loadscope-reorder), a few at a
    time, one unit each but for the modules of ``WHOLE`` and ``TOGETHER``."""
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return TOGETHER.get(module) or (module if module in WHOLE else nodeid)

    return Scheduling(config, log)


# Tests that mostly wait, long (a standby lost, a server killed, PostgreSQL stopped: a timeout
# runs out, a storm paced in simulated time) and use little of the CPU. Begun all at once at the
# start, they held every worker while the cores stood a quarter to a half idle; one is handed
# out after each stretch of other tests through the first half of the run instead, the longest
# first.
WAITING = (
    "tests/faults/test_relay_storm.py",
    "tests/faults/test_faults.py",
    "tests/failover/",
    "tests/faults/",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item, prefixes: tuple[str, ...]) -> int:
        found = (i for i, prefix in enumerate(prefixes) if item.nodeid.startswith(prefix))
        return next(found, len(prefixes))

    waiting = sorted((i for i in items if rank(i, WAITING) < len(WAITING)),
                     key=lambda item: rank(item, WAITING))  # fmt: skip
    rest = sorted((i for i in items if rank(i, WAITING) == len(WAITING)),
                  key=lambda item: rank(item, FIRST))  # fmt: skip
    stretch = max(1, len(rest) // (2 * max(1, len(waiting))))
    ordered: list[pytest.Item] = []
    for n, test in enumerate(rest):
        if n % stretch == 0 and waiting:
            ordered.append(waiting.pop(0))
        ordered.append(test)
    items[:] = ordered + waiting


# The most connections one test process holds at once: in the race of 50 connections
# (tests/integration/test_concurrency.py) 52, in any other test about 28 (a storm's pools, the
# fixtures' own), measured. Each embedded server allows 100, for one process.
HEAVIEST, TYPICAL = 55, 30


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Under DATABASE_URL every test process shares one server: no more of them than it has
    connections for (a stock server allows 100, which four processes can exhaust), said once."""
    url = os.environ.get("DATABASE_URL")
    wanted = len(getattr(config.option, "tx", None) or [])
    if not url or wanted < 2 or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT current_setting('max_connections')::int"
                " - current_setting('superuser_reserved_connections')::int"
                " - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
            ).fetchone()
    except psycopg.Error as exc:
        raise pytest.UsageError(f"DATABASE_URL: no connection to its server ({exc})") from exc
    free = int(row[0]) if row else 0
    fits = 1 + max(0, free - HEAVIEST) // TYPICAL  # one in the heaviest test, the others not
    if fits < wanted:
        config.option.numprocesses = fits
        config.option.tx = config.option.tx[:fits]
        sys.stderr.write(
            f"payhooks tests: {fits} worker(s), not {wanted}: DATABASE_URL's server has {free}"
            f" connections free (max_connections), a worker needs up to {HEAVIEST}\n"
        )


@pytest.fixture(autouse=True)
def delivery_logs_stopped(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every delivery log a test's app made, written and stopped after the test: a Flask or
    Starlette app's log is closed only when the process exits, and its writer, kept running
    by its thread after the test, woke every half second for the rest of the run, connecting
    again and again to a database given back (80 writers at once on a worker). Stopped, one
    written to again starts anew (an app a module's fixture made serves its next test)."""
    made: list[DeliveryLog] = []
    made_one = DeliveryLog.__init__

    def noted(log: DeliveryLog, *args: Any, **kwargs: Any) -> None:
        made_one(log, *args, **kwargs)
        made.append(log)

    monkeypatch.setattr(DeliveryLog, "__init__", noted)
    yield
    for log in made:
        log.stop()


@pytest.fixture(scope="session")
def admin_url() -> Iterator[str]:
    """The embedded server's folder is not under pytest's own temporary root: another pytest
    session starting meanwhile resets that root to 0700, and the server, which runs as a user
    of its own, would lose its data directory mid-run."""
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url
        return
    home = Path(tempfile.mkdtemp(prefix="payhooks-test-pg-"))
    try:
        url = database.embedded_url(home)
        with psycopg.connect(url, autocommit=True) as conn:
            for setting in UNDURABLE:  # a test cluster, thrown away after the run
                conn.execute(f"ALTER SYSTEM SET {setting} = off".encode())
            conn.execute("SELECT pg_reload_conf()")
        yield url
    finally:
        database.stop_embedded(home)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def template_db(admin_url: str) -> Iterator[str]:
    name = f"payhooks_tpl_{uuid.uuid4().hex[:10]}"
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    with psycopg.connect(make_conninfo(admin_url, dbname=name), autocommit=True) as conn:
        database.migrate(conn)
    yield name
    _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# What a test may change in a database besides its rows: its schema objects, functions,
# triggers, defaults and settings. A database whose shape is still the template's is emptied and
# handed to the next test; one whose shape a test changed is dropped. Only objects made after
# initdb are read (oid 16384 and up, FirstNormalObjectId): the built-in ones no test can change,
# and reading their thousands of rows after every test cost more than the emptying. Schemas are
# read whole (``public`` is older than 16384 and a test may drop it) but for the temporary
# schemas a session makes the first time it needs one, which stay, empty, once it ends: a
# session's temporary tables go with it (its end is waited for, ``ENDED``)
SHAPE = """
SELECT md5(concat_ws('|',
    (SELECT string_agg(concat_ws(',', oid, relname, relnamespace, relkind, relnatts,
                                 reloptions::text, relpersistence), ';' ORDER BY oid)
     FROM pg_class WHERE oid >= 16384),
    (SELECT string_agg(concat_ws(',', attrelid, attname, atttypid, attnotnull, atthasdef,
                                 attisdropped), ';' ORDER BY attrelid, attnum)
     FROM pg_attribute WHERE attnum > 0 AND attrelid >= 16384),
    (SELECT string_agg(md5(concat_ws(',', oid, proname, prosrc)), ';' ORDER BY oid) FROM pg_proc
     WHERE oid >= 16384),
    (SELECT string_agg(concat_ws(',', oid, tgname, tgenabled), ';' ORDER BY oid) FROM pg_trigger
     WHERE oid >= 16384),
    (SELECT string_agg(concat_ws(',', oid, conname, convalidated), ';' ORDER BY oid)
     FROM pg_constraint WHERE oid >= 16384),
    (SELECT string_agg(concat_ws(',', oid, nspname), ';' ORDER BY oid) FROM pg_namespace
     WHERE nspname !~ '^pg_(toast_)?temp_'),
    (SELECT string_agg(md5(adbin::text), ';' ORDER BY oid) FROM pg_attrdef WHERE oid >= 16384),
    (SELECT string_agg(concat_ws(',', oid, typname), ';' ORDER BY oid) FROM pg_type
     WHERE oid >= 16384),
    (SELECT string_agg(setconfig::text, ';') FROM pg_db_role_setting
     WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database()))
))
"""
# Every row a test wrote (deleted: a test writes few, and TRUNCATE's new files cost more), and
# the planner statistics its ANALYZE left (a plan test must see a fresh database's). The tables
# the template holds rows in (the migrations' records: payhooks', Django's) are kept, their rows
# compared instead (``Databases.kept``); they are named in the setting ``payhooks_test.kept``.
EMPTIED = """
DO $$
DECLARE name text;
BEGIN
    SET LOCAL session_replication_role = replica;  -- no foreign-key checks while emptying
    FOR name IN
        SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
        WHERE schemaname NOT IN ('pg_catalog', 'information_schema')
          AND format('%I.%I', schemaname, tablename)
              <> ALL(string_to_array(current_setting('payhooks_test.kept'), ' '))
    LOOP
        IF pg_relation_size(name) = 0 THEN  -- never written to: nothing to empty
            CONTINUE;
        ELSIF pg_relation_size(name) > 8 * 8192 THEN  -- a test filled it: new, empty files
            EXECUTE 'TRUNCATE ' || name || ' CASCADE';
        ELSE
            EXECUTE 'DELETE FROM ' || name;
        END IF;
    END LOOP;
    DELETE FROM pg_statistic s USING pg_class c, pg_namespace n
    WHERE s.starelid = c.oid AND c.relnamespace = n.oid
      AND n.nspname NOT IN ('pg_catalog', 'information_schema');
END
$$
"""
# The tables holding rows in a fresh clone, and its sequences where they stand.
FILLED = """
SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
WHERE schemaname NOT IN ('pg_catalog', 'information_schema')
  AND pg_relation_size(format('%I.%I', schemaname, tablename)) > 0
ORDER BY 1
"""
SEQUENCES = """
SELECT format('%I.%I', schemaname, sequencename), coalesce(last_value, start_value),
       last_value IS NOT NULL
FROM pg_sequences
"""
RESTARTED = """
SELECT setval(v.name::regclass, v.value, v.called)
FROM unnest(%s::text[], %s::bigint[], %s::bool[]) AS v(name, value, called)
"""
# What a test made beside the template's objects (a merchant's own tables, functions, triggers,
# views, types, schemas), dropped so the database has the template's shape again. A new object
# takes a new oid, above every oid the template held (``payhooks_test.made_after``). Temporary
# schemas (pg_temp_N) stay: PostgreSQL reuses them. Anything else a test changed (a column, a
# setting) still tells in the shape, and that database is dropped.
UNMADE = r"""
DO $$
DECLARE
    made_after oid := current_setting('payhooks_test.made_after')::oid;
    schemas text[];
    relations text[];
    routines text[];
    types text[];
    triggers text[];
    name text;
BEGIN
    SELECT array_agg(format('%I', nspname)) INTO schemas FROM pg_namespace
    WHERE oid > made_after AND nspname NOT LIKE 'pg\_%';
    SELECT array_agg(format('%s %I.%I', CASE c.relkind WHEN 'v' THEN 'VIEW'
                                                        WHEN 'm' THEN 'MATERIALIZED VIEW'
                                                        WHEN 'S' THEN 'SEQUENCE'
                                                        WHEN 'i' THEN 'INDEX'
                                                        WHEN 'c' THEN 'TYPE'
                                                        ELSE 'TABLE' END, n.nspname, c.relname))
    INTO relations FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid > made_after AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'i', 'c')
      AND n.nspname NOT LIKE 'pg\_%'
      AND NOT EXISTS (  -- an identity's sequence, a key's index: they go with their table
          SELECT FROM pg_depend d
          WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
            AND d.refobjid > made_after AND d.deptype IN ('a', 'i'));
    SELECT array_agg(format('%I.%I(%s)', n.nspname, p.proname,
                            pg_get_function_identity_arguments(p.oid)))
    INTO routines FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE p.oid > made_after;
    SELECT array_agg(format('%I.%I', n.nspname, t.typname)) INTO types
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE t.oid > made_after AND t.typtype IN ('e', 'd', 'r', 'm');
    SELECT array_agg(format('%I ON %I.%I', t.tgname, n.nspname, c.relname)) INTO triggers
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE t.oid > made_after AND NOT t.tgisinternal;
    FOREACH name IN ARRAY coalesce(schemas, '{}') LOOP
        EXECUTE 'DROP SCHEMA IF EXISTS ' || name || ' CASCADE';
    END LOOP;
    FOREACH name IN ARRAY coalesce(triggers, '{}') LOOP
        EXECUTE 'DROP TRIGGER IF EXISTS ' || name || ' CASCADE';
    END LOOP;
    FOREACH name IN ARRAY coalesce(relations, '{}') LOOP
        EXECUTE regexp_replace(name, '^(MATERIALIZED VIEW|[A-Z]+) ', 'DROP \1 IF EXISTS ')
                || ' CASCADE';
    END LOOP;
    FOREACH name IN ARRAY coalesce(routines, '{}') LOOP
        EXECUTE 'DROP ROUTINE IF EXISTS ' || name || ' CASCADE';
    END LOOP;
    FOREACH name IN ARRAY coalesce(types, '{}') LOOP
        EXECUTE 'DROP TYPE IF EXISTS ' || name || ' CASCADE';
    END LOOP;
END
$$
"""
# The newest object of a fresh clone: every oid a test's objects take is above it.
NEWEST = """
SELECT greatest((SELECT max(oid) FROM pg_class), (SELECT max(oid) FROM pg_proc),
                (SELECT max(oid) FROM pg_type), (SELECT max(oid) FROM pg_namespace),
                (SELECT max(oid) FROM pg_trigger), (SELECT max(oid) FROM pg_constraint),
                (SELECT max(oid) FROM pg_attrdef))
"""
# The sizes the planner starts from, as the template has them (never analysed).
SIZES = """
SELECT c.oid, c.relpages, c.reltuples, c.relallvisible FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
"""
RESIZED = """
UPDATE pg_class c SET relpages = v.relpages, reltuples = v.reltuples,
                      relallvisible = v.relallvisible
FROM unnest(%s::oid[], %s::int[], %s::real[], %s::int[]) AS v(oid, relpages, reltuples,
                                                             relallvisible)
WHERE c.oid = v.oid
  AND (c.relpages, c.reltuples, c.relallvisible)
      IS DISTINCT FROM (v.relpages, v.reltuples, v.relallvisible)
"""
# Only the sizes a test changed are written back: writing every table's again left hundreds of
# dead catalog rows a test, which every later test's reads of pg_class waded through.
# The sessions a test left in its database, ended. PostgreSQL's own wait for an ended session
# (``pg_terminate_backend(pid, timeout)``) looks every 100 ms, as a rename or a drop does for a
# session still closing: the suite waited 70 s a run in these (1,642 renames). ``Databases``
# waits in steps of a millisecond instead (``_ended``, ``_close_and_wait``).
ENDED = """
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = %s AND pid <> pg_backend_pid()
"""
REMAINING = """
SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()
"""


class Databases:
    """This test process's databases, cloned from a migrated template: a test's database
    is emptied afterwards and given to the next test, unless the test changed its shape or the
    rows the template holds; what the test made beside the template's objects is dropped first.
    Cloning a database per test took about half the suite's time."""

    def __init__(self, admin_url: str, template: str) -> None:
        self.admin_url, self.template = admin_url, template
        self.spare: str | None = None
        self.shape: str | None = None
        self.sizes: list[list[Any]] = []
        self.newest = 0
        self.kept: list[str] = []
        self.kept_rows: str | None = None
        self.sequences: list[list[Any]] = []

    def take(self) -> str:
        name, self.spare = self.spare, None
        if name is None:
            name = f"payhooks_t_{uuid.uuid4().hex[:12]}"
            _admin(self.admin_url, f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
            if self.shape is None:
                with psycopg.connect(make_conninfo(self.admin_url, dbname=name)) as conn:
                    self._learn(conn)
        return name

    def _learn(self, conn: psycopg.Connection[Any]) -> None:
        """What a fresh clone is: its shape, its schemas, the tables it holds rows in and
        those rows, where its sequences stand, the sizes the planner starts from."""
        self.shape = self._shape(conn)
        newest = conn.execute(NEWEST.encode()).fetchone()
        assert newest is not None
        self.newest = int(newest[0])
        self.kept = [row[0] for row in conn.execute(FILLED.encode())]
        self.kept_rows = self._kept_rows(conn)
        rows = conn.execute(SEQUENCES.encode()).fetchall()
        self.sequences = [[row[i] for row in rows] for i in range(3)]
        rows = conn.execute(SIZES.encode()).fetchall()
        self.sizes = [[row[i] for row in rows] for i in range(4)]

    def give_back(self, name: str) -> None:
        """Empty the test's database for the next test, under a new name: a thread the test
        left behind (a delivery log's writer reconnecting after ``ENDED``) then finds no
        database, rather than writing into the next test's."""
        if self._emptied(name):
            fresh = f"payhooks_t_{uuid.uuid4().hex[:12]}"
            try:
                _admin(self.admin_url, f'ALTER DATABASE "{name}" RENAME TO "{fresh}"')
            except psycopg.Error:
                pass  # such a thread connected again meanwhile: dropped below
            else:
                self.spare = fresh
                return
        _admin(self.admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _emptied(self, name: str) -> bool:
        """Whether ``name`` now holds what a fresh clone holds (else it is dropped)."""
        url = make_conninfo(self.admin_url, dbname=name)
        try:
            settings = {
                "lock_timeout": "10s",
                "payhooks_test.made_after": str(self.newest),
                "payhooks_test.kept": " ".join(self.kept),
            }
            options = " ".join(f"-c {k}={_escaped(v)}" for k, v in settings.items())
            with _close_and_wait(psycopg.connect(url, autocommit=True, options=options)) as conn:
                _ended(conn, name)
                newest = conn.execute(NEWEST.encode()).fetchone()
                if newest is None or int(newest[0]) > self.newest:  # the test made something
                    conn.execute(UNMADE.encode())
                if self._shape(conn) == self.shape and self._kept_rows(conn) == self.kept_rows:
                    conn.execute(EMPTIED.encode())
                    conn.execute(RESTARTED.encode(), self.sequences)
                    conn.execute(RESIZED.encode(), self.sizes)
                    return True
        except psycopg.Error:
            pass  # a database left locked or gone: dropped, never reused
        return False

    def _kept_rows(self, conn: psycopg.Connection[Any]) -> str:
        """A digest of the rows of the tables the template holds rows in."""
        parts = [
            f"(SELECT string_agg(md5(t::text), ',' ORDER BY md5(t::text)) FROM {table} t)"
            for table in self.kept
        ]
        if not parts:
            return ""
        row = conn.execute(f"SELECT md5(concat_ws('|', {', '.join(parts)}))".encode()).fetchone()
        assert row is not None
        return str(row[0])

    def close(self) -> None:
        if self.spare is not None:
            _admin(self.admin_url, f'DROP DATABASE IF EXISTS "{self.spare}" WITH (FORCE)')

    def _shape(self, conn: psycopg.Connection[Any]) -> str:
        row = conn.execute(SHAPE.encode()).fetchone()
        assert row is not None
        return str(row[0])


@contextmanager
def cloned_from_new(
    admin_url: str, prefix: str, prepare: Callable[[str], object] | None = None
) -> Iterator[Databases]:
    """``Databases`` cloned from a template made for them: an empty database, then
    ``prepare(url)`` (migrations, a shop's tables); template and clones dropped at the end."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    try:
        if prepare is not None:
            prepare(make_conninfo(admin_url, dbname=name))
        made = Databases(admin_url, name)
        try:
            yield made
        finally:
            made.close()
    finally:
        _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def databases(admin_url: str, template_db: str) -> Iterator[Databases]:
    made = Databases(admin_url, template_db)
    yield made
    made.close()


@pytest.fixture
def database_url(admin_url: str, databases: Databases) -> Iterator[str]:
    name = databases.take()
    yield make_conninfo(admin_url, dbname=name)
    databases.give_back(name)


@pytest.fixture
def conn(database_url: str) -> Iterator[db.Connection]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


@pytest.fixture
def proxy(database_url: str) -> Iterator[Proxy]:
    """The test's database behind a loopback proxy the test cuts and restores: the database
    gone away (every connection reset, new ones refused) and back."""
    made = Proxy(database_url)
    yield made
    made.close()


_ADMIN: dict[str, psycopg.Connection[Any]] = {}
_ADMIN_LOCK = threading.Lock()


def _escaped(value: str) -> str:
    """``value`` as one word of libpq's ``options``: its spaces and backslashes escaped."""
    return value.replace("\\", "\\\\").replace(" ", "\\ ")


def _ended(conn: psycopg.Connection[Any], name: str) -> None:
    """End every other session in database ``name`` and wait until they are gone (10 s at most:
    then the rename or drop that follows fails and the database is not reused)."""
    conn.execute(ENDED, (name,))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = conn.execute(REMAINING, (name,)).fetchone()
        if row is None or row[0] == 0:
            return
        time.sleep(0.001)


@contextmanager
def _close_and_wait(conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """``conn``, closed at the end and waited for until its server process has exited (the
    server closes the socket last): until then, PostgreSQL still counts the session in its
    database, and a rename of the database waits a tenth of a second for it."""
    watcher = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        with conn:
            yield conn
        watcher.settimeout(10)
        with suppress(OSError):  # the server gone already, or slow: the rename waits its way
            while watcher.recv(4096):
                pass
    finally:
        watcher.close()


def _admin(url: str, sql: str) -> None:
    """``sql`` on one connection to the admin database kept for the process: a test's database
    is created, renamed or dropped on it, not on a new connection each time (a backend started
    per test and per statement); one a restart broke is replaced at the next call."""
    with _ADMIN_LOCK:
        conn = _ADMIN.get(url)
        if conn is None or conn.closed or conn.broken:
            conn = _ADMIN[url] = psycopg.connect(url, autocommit=True)
        conn.execute(sql.encode())


DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Service:
    """A real payhooks app served by uvicorn on a loopback port, for HTTP-level tests."""

    base_url: str
    token: str
    database_url: str

    def client(self) -> httpx.Client:
        return loopback.Client(
            base_url=self.base_url, timeout=10, headers={"authorization": f"Bearer {self.token}"}
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving_app(app: Any) -> Iterator[str]:
    """Any ASGI app under real uvicorn on a loopback port, until the block ends; yields its
    base URL. The app's lifespan opens and closes what it holds. The server is handed its
    socket bound already (a port chosen free, then bound by the server, may be taken between
    the two by another test's process), and stopped when told, not at uvicorn's next tick: the
    suite starts and stops a server about a thousand times a run."""
    not_started = AssertionError("the app did not start")
    with served(app, name="payhooks-test-app", grace_s=10, not_started=not_started) as url:
        yield url


@contextmanager
def serving(settings: Settings, url: str) -> Iterator[Service]:
    token = "test-token"
    with serving_app(create_app(settings, api_token=token, url=url)) as base_url:
        yield Service(base_url=base_url, token=token, database_url=url)


@pytest.fixture
def service(database_url: str) -> Iterator[Service]:
    from tests.factories import SETTINGS

    with serving(SETTINGS, database_url) as running:
        yield running


class Inbox:
    """A real SMTP server on loopback (aiosmtpd) that keeps what it receives.

    Recipients containing ``reject`` get a permanent 550, ``later`` a temporary 451;
    ``delay`` seconds are spent on each message, to catch a worker mid-batch.
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.messages: list[EmailMessage] = []
        self.delay = delay
        self._lock = threading.Lock()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if "reject" in address:
            return "550 no such mailbox"
        if "later" in address:
            return "451 try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.delay:
            await asyncio.sleep(self.delay)
        with self._lock:
            self.messages.append(message_from_bytes(envelope.content, policy=default))
        return "250 OK"

    def ids(self) -> list[str]:
        with self._lock:
            return [m["Message-ID"] for m in self.messages]


@contextmanager
def smtp_server(inbox: Inbox, port: int | None = None) -> Iterator[int]:
    from aiosmtpd.controller import Controller

    port = port or free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


@pytest.fixture
def inbox() -> Iterator[tuple[Inbox, int]]:
    box = Inbox()
    with smtp_server(box) as port:
        yield box, port


@contextmanager
def _one_crowd_at_a_time(threads: int) -> Iterator[None]:
    """Held while more threads than half a worker's usual connections each hold one, under
    DATABASE_URL only: the test processes share that server, and two crowds at once would
    exhaust a stock one (``pytest_configure``). Each embedded server is one process's alone."""
    if threads <= TYPICAL // 2 or not os.environ.get("DATABASE_URL"):
        yield
        return
    import fcntl

    with (Path(tempfile.gettempdir()) / "payhooks-tests-crowd.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def run_threads(threads: list[threading.Thread]) -> None:
    """Start ``threads`` and wait for each (60 s at most), one crowd of connections at a time
    across the test processes."""
    with _one_crowd_at_a_time(len(threads)):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
            assert not thread.is_alive()


def released_together(
    items: list[T], prepare: Callable[[T], Any], act: Callable[[Any, T], R]
) -> list[R]:
    """Each item on its own thread: ``prepare(item)`` (a context manager, e.g. a connection)
    is entered first, then all threads are released at once by a barrier to ``act``. Results
    come back in completion order; any thread's exception fails the calling test (one failing
    to prepare releases the others at once, with ``BrokenBarrierError``)."""
    barrier = threading.Barrier(len(items))
    results: list[R] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(item: T) -> None:
        try:
            with prepare(item) as resource:
                barrier.wait()
                result = act(resource, item)
            with lock:
                results.append(result)
        except BaseException as exc:  # reported below, in the test's own thread
            barrier.abort()
            with lock:
                errors.append(exc)

    run_threads([threading.Thread(target=run, args=(item,)) for item in items])
    assert [e for e in errors if not isinstance(e, threading.BrokenBarrierError)] == []
    assert errors == []
    return results
