"""httpx for the suite's servers on loopback, with one TLS context for every client: httpx
builds a context per client (and per ``httpx.get``), loading every root certificate, about
50 ms of CPU each time, for servers that speak plain HTTP."""

from __future__ import annotations

import functools
from typing import Any

import httpx

TLS = httpx.create_ssl_context()
Client = functools.partial(httpx.Client, verify=TLS)
AsyncClient = functools.partial(httpx.AsyncClient, verify=TLS)


def get(url: str, **options: Any) -> httpx.Response:
    return httpx.get(url, verify=TLS, **options)


def post(url: str, **options: Any) -> httpx.Response:
    return httpx.post(url, verify=TLS, **options)
