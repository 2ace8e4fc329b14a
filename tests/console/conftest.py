"""A served payhooks with an operator, and a logged-in HTTP client, for the console's tests."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import psycopg
import pytest

from payhooks.service.console import auth
from payhooks.service.web import create_app
from tests.conftest import serving_app
from tests.factories import SETTINGS

OPERATOR, PASSWORD = "asha", "correct horse battery staple"


@dataclass(frozen=True, slots=True)
class Console:
    base_url: str
    database_url: str

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=10, follow_redirects=False)

    def logged_in(self, name: str = OPERATOR, password: str = PASSWORD) -> httpx.Client:
        client = self.client()
        answer = client.post("/console/login", data={"name": name, "password": password})
        assert answer.status_code == 303, answer.text
        return client


@pytest.fixture
def console(database_url: str) -> Iterator[Console]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        auth.add_operator(conn, OPERATOR, PASSWORD)
    app = create_app(SETTINGS, api_token="api-token", url=database_url)
    with serving_app(app) as base_url:
        yield Console(base_url=base_url, database_url=database_url)


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "no CSRF token on the page"
    return found.group(1)
