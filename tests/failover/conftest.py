"""A primary and a streaming standby (``payhooks.sim.standby``) for the failover tests, and
`payhooks serve` processes (tests/faults) given both hosts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from payhooks.sim.standby import Cluster, new_home
from tests.conftest import free_port
from tests.faults.conftest import server_on  # noqa: F401  # its fixture


@pytest.fixture(params=[True, False], ids=["synchronous", "asynchronous"])
def cluster(request) -> Iterator[Cluster]:
    made = Cluster(home=new_home(), ports=(free_port(), free_port()), synchronous=request.param)
    try:
        made.start()
        made.migrate()
        yield made
    finally:
        made.stop()
