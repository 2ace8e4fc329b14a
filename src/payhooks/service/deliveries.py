"""The service's delivery log: the core's (``payhooks.operations.deliverylog``), written on the side
connection the service's probes use too, under the service's logger."""

from __future__ import annotations

import logging
from collections.abc import Callable

from payhooks.operations import deliverylog
from payhooks.operations.deliverylog import (
    MAX_DETAIL_CHARS,
    MAX_LINES_PER_COPY,
    Delivery,
    answered,
    refused,
)
from payhooks.service.config import Settings
from payhooks.service.metrics import side_connection

log = logging.getLogger("payhooks.service.deliveries")


class DeliveryLog(deliverylog.DeliveryLog):
    """The core's log on the service's side connection to ``url``."""

    def __init__(
        self,
        url: str,
        settings: Settings,
        *,
        max_pending: int = 50_000,
        every_seconds: float = 0.5,
        on_drop: Callable[[int], None] = lambda n: None,
        on_unwritable: Callable[[int], None] = lambda n: None,
    ) -> None:
        super().__init__(
            side_connection(url, settings),
            max_pending=max_pending,
            every_seconds=every_seconds,
            on_drop=on_drop,
            on_unwritable=on_unwritable,
            logger=log,
        )


__all__ = [
    "MAX_DETAIL_CHARS",
    "MAX_LINES_PER_COPY",
    "Delivery",
    "DeliveryLog",
    "answered",
    "refused",
    "side_connection",
]
