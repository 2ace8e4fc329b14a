"""The door's own Python work on a duplicate, step by step, in one process: no HTTP server,
no database, so the figures hold still on a busy machine where a served run's do not.

    .venv/bin/python bench/door.py [--deliveries 20000] [--rounds 5]

A duplicate costs the service's server more CPU than the plain implementation's
(docs/performance.md): this prints where payhooks' share of it goes. Each step is timed alone
over the same signed Razorpay capture, then the whole door (``Endpoint.deliver_async``, its
claim answering ``duplicate`` at once, the answer told to the metrics and the delivery log as
the service tells them) and, beside it, what the plain implementation does in Python for the
same request (``bench/_plain.py``: the signature's HMAC and ``json.loads``). The log line goes
to ``/dev/null`` through the service's own formatter. The best of ``--rounds`` is printed.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable
from functools import partial

from _load import KEYS

from payhooks.events import storable
from payhooks.intake.endpoint import Arrival, Endpoint, Reply, header_map
from payhooks.intake.ingest import Outcome, Receipt, Received
from payhooks.operations import deliverylog
from payhooks.plumbing import logs
from payhooks.service import metrics, web
from payhooks.service.config import Settings
from payhooks.sim.gateway import Gateway


class Noted:
    """The delivery log as the door feeds it: the line made, not written (its thread's work)."""

    def __init__(self) -> None:
        self.lines: list[deliverylog.Delivery] = []

    def note(self, arrival: Arrival, reply: Reply) -> None:
        self.lines.append(deliverylog.line(arrival, reply))


def best(step: Callable[[], object], count: int, rounds: int) -> float:
    """The least µs per call of ``step`` over ``rounds`` runs of ``count`` calls."""
    times = []
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(count):
            step()
        times.append((time.process_time() - started) / count * 1e6)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    logs.configure()
    logging.getLogger("payhooks").handlers[0].setStream(open(os.devnull, "w"))  # noqa: SIM115
    environ = {**os.environ, **KEYS.env(), "DATABASE_URL": "postgresql://bench@127.0.0.1/bench"}
    served = {p.value: a for p, a in Settings.from_env(environ).adapters().items()}
    adapter = served["razorpay"]
    delivery = Gateway(KEYS).razorpay(
        "payment.captured", payment_id="pay_door1", order_id="order_door1", amount_paise=100
    )
    body, pairs = delivery.body, tuple(delivery.headers.items())
    headers = header_map(pairs, adapter)
    step = Endpoint(served, logging.getLogger("payhooks.webhooks"))
    received = step.received("razorpay", body, pairs)
    receipt = Receipt(outcome=Outcome.DUPLICATE, event=received.event, order_id="order_door1")
    witness = web.Witness(metrics.Metrics())
    witness.log = Noted()  # type: ignore[assignment]
    reply = step.answered(received, receipt)

    def arrival() -> Arrival:
        return Arrival(gateway="razorpay", started=time.perf_counter(), received_at=web._now())

    async def claim(_: Received) -> Receipt:
        return receipt

    def door() -> None:
        steps = step.deliver_async(
            "razorpay", body, pairs, claim, seen=partial(witness.saw, arrival())
        )
        try:
            steps.send(None)
        except StopIteration as done:
            web.reply_response(done.value)

    secret = KEYS.razorpay.encode()
    signature = headers["x-razorpay-signature"].encode()

    def plain() -> None:
        digest = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
        assert hmac.compare_digest(digest, signature)
        json.loads(body)
        web.JSONResponse({"status": "duplicate"})

    count, rounds = args.deliveries, args.rounds
    rows = [
        ("the signature (HMAC-SHA256 over the body)", lambda: adapter.verify(body, headers)),
        ("the event parsed", lambda: adapter.parse(body, headers)),
        ("its fields checked storable", lambda: storable(received.event)),
        ("verified and parsed (Endpoint.received)", lambda: step.received("razorpay", body, pairs)),
        ("the answer and its log line", lambda: step.answered(received, receipt)),
        ("metrics and the delivery log's line", lambda: witness.saw(arrival(), reply)),
        ("the response", lambda: web.reply_response(reply)),
        ("the whole door, its claim answering at once", door),
        ("plain: HMAC, json.loads, the response", plain),
    ]
    print(f"{'a duplicate, in process':48s} µs (best of {rounds} x {count})")
    for name, timed in rows:
        print(f"{name:48s} {best(timed, count, rounds):6.1f}", flush=True)


if __name__ == "__main__":
    main()
