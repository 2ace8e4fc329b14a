"""httpx for the suite's servers on loopback, with one TLS context for every client: httpx
builds a context per client (and per ``httpx.get``), loading every root certificate, about
50 ms of CPU each time, for servers that speak plain HTTP.

Their timeout is a minute, not httpx's five seconds: a server of the suite answers when it
answers, and on a machine loaded past its cores (a worker booting, a subprocess importing) five
seconds is a bound the test did not mean to set. A test about timing passes its own."""

from __future__ import annotations

import functools
from typing import Any

import httpx

TLS = httpx.create_ssl_context()
PATIENCE_S = 60.0
Client = functools.partial(httpx.Client, verify=TLS, timeout=PATIENCE_S)
AsyncClient = functools.partial(httpx.AsyncClient, verify=TLS, timeout=PATIENCE_S)


def get(url: str, **options: Any) -> httpx.Response:
    return httpx.get(url, verify=TLS, **{"timeout": PATIENCE_S, **options})


def post(url: str, **options: Any) -> httpx.Response:
    return httpx.post(url, verify=TLS, **{"timeout": PATIENCE_S, **options})
