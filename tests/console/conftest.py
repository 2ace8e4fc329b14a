"""A served payhooks with an operator, and a logged-in HTTP client, for the console's tests."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest

from payhooks.operations import operators
from payhooks.service.web import create_app
from tests import loopback
from tests.conftest import serving_app
from tests.factories import SETTINGS
from tests.reconcile.conftest import gateway_api, rig  # noqa: F401  # fixtures: the gateways' doubles

OPERATOR, PASSWORD = "asha", "correct horse battery staple"


@functools.cache
def password_hash() -> str:
    """PASSWORD's scrypt hash, made once a run at the least cost a hash may name (n = 2^10, not
    2^14): every console test adds this operator and logs in, and a login checks the hash at the
    cost it names, for real (40 ms of CPU at the product's cost; the suite logs in ~400 times).
    Hashes made at the product's cost: tests/console/test_passwords.py, and every operator added by
    ``add_operator`` or ``payhooks operator add``."""
    return operators.hash_password(PASSWORD, cost=(10, 8, 1))


@dataclass(frozen=True, slots=True)
class Console:
    base_url: str
    database_url: str
    app: Any  # the served app, to read its pools' counters

    def client(self) -> httpx.Client:
        return loopback.Client(base_url=self.base_url, timeout=10, follow_redirects=False)

    def logged_in(self, name: str = OPERATOR, password: str = PASSWORD) -> httpx.Client:
        client = self.client()
        answer = client.post("/console/login", data={"name": name, "password": password})
        assert answer.status_code == 303, answer.text
        return client


@pytest.fixture
def console(database_url: str) -> Iterator[Console]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO payhooks_operators (name, password_hash) VALUES (%s, %s)",
            (OPERATOR, password_hash()),
        )
    app = create_app(SETTINGS, api_token="api-token", url=database_url)
    with serving_app(app) as base_url:
        yield Console(base_url=base_url, database_url=database_url, app=app)


def said(answer: httpx.Response) -> str:
    """Where an action's redirect leads, its notice's signature left off (``pages.signed``)."""
    return re.sub(r"&sig=[0-9a-f]{64}$", "", answer.headers["location"])


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "no CSRF token on the page"
    return found.group(1)


# Tables the plan tests fill like a busy shop's (the outbox view reads payhooks_outbox): none
# may be read whole by a console page.
FILLED = {"processed_webhooks", "deliveries", "payments", "payhooks_outbox"}


class Recording(psycopg.Cursor[Any]):
    """Notes every statement it runs, with its parameters, to read their plans afterwards."""

    ran: list[tuple[str, Any]]

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self.connection.ran.append((query, params))  # type: ignore[attr-defined]
        return super().execute(query, params, **kwargs)


@pytest.fixture
def recording(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True, cursor_factory=Recording) as conn:
        conn.ran = []  # type: ignore[attr-defined]
        yield conn


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def read_whole(conn, ran: list[tuple[str, Any]]) -> list[tuple[str, str, int]]:
    """Each statement run as PostgreSQL plans it for those very parameters: the filled tables
    it scans whole, or of which it reads (returns or filters out) more than a story's worth."""
    found = []
    for query, params in ran:
        explain = f"EXPLAIN (ANALYZE, FORMAT JSON) {query}".encode()
        [(plan,)] = conn.execute(explain, params).fetchall()
        for node in nodes(plan[0]["Plan"]):
            if node.get("Relation Name") not in FILLED:
                continue
            read = node["Actual Rows"] * node["Actual Loops"]
            read += node.get("Rows Removed by Filter", 0)
            read += node.get("Rows Removed by Index Recheck", 0)
            if node["Node Type"] == "Seq Scan" or read > 100:
                found.append((" ".join(query.split()[:8]), node["Relation Name"], read))
    return found
