"""A primary and a streaming standby (``payhooks.sim.standby``) for the failover tests, and
`payhooks serve` processes (tests/faults) given both hosts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from payhooks.sim.standby import Cluster, new_home
from tests.conftest import free_port
from tests.faults.conftest import server_on  # noqa: F401  # its fixture
from tests.reconcile.conftest import gateway_api  # noqa: F401  # its fixture


def _cluster(synchronous: bool) -> Iterator[Cluster]:
    made = Cluster(home=new_home(), ports=(free_port(), free_port()), synchronous=synchronous)
    try:
        made.start()
        made.migrate()
        yield made
    finally:
        made.stop()


@pytest.fixture
def synchronous_cluster() -> Iterator[Cluster]:
    yield from _cluster(True)


@pytest.fixture
def asynchronous_cluster() -> Iterator[Cluster]:
    yield from _cluster(False)
