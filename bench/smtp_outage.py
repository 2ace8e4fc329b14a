"""SMTP down while payments flow: webhooks keep answering, emails go out once it returns.

    .venv/bin/python bench/smtp_outage.py [--orders 500] [--workers 8] [--senders 2]

Runs `payhooks serve` and `payhooks worker` processes against a fresh database with the SMTP
port closed, delivers N captures over HTTP, then starts a real SMTP server (aiosmtpd) on that
port and measures how long the outbox takes to drain and whether any email arrived twice.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import threading
import time
from collections import Counter

import psycopg
from _load import KEYS, PAYHOOKS, database, free_port, load, service
from aiosmtpd.controller import Controller
from purge import SEED_SHOP, SKUS

from payhooks.service import outbox
from payhooks.sim.gateway import Gateway


class Inbox:
    def __init__(self) -> None:
        self.ids: Counter[str] = Counter()
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):  # type: ignore[no-untyped-def]
        from email import message_from_bytes

        with self.lock:
            self.ids[message_from_bytes(envelope.content)["Message-ID"]] += 1
        return "250 OK"


def pending(url: str) -> int:
    with psycopg.connect(url) as conn:
        return outbox.counts(conn)["pending"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", type=int, default=500)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--senders", type=int, default=2)
    args = parser.parse_args()
    port = free_port()
    with database() as url:
        with psycopg.connect(url, autocommit=True) as conn:
            for sql in SEED_SHOP:
                conn.execute(sql, {"skus": SKUS, "carts": args.orders})
        env = {
            **os.environ,
            **KEYS.env(),
            "DATABASE_URL": url,
            "PAYHOOKS_SMTP_URL": f"smtp://127.0.0.1:{port}",
            "PAYHOOKS_ALERT_EMAIL": "ops@example.com",
        }
        senders = [
            subprocess.Popen(
                [PAYHOOKS, "worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            for _ in range(args.senders)
        ]
        try:
            with service(url) as base:
                gateway = Gateway(KEYS)
                deliveries = (
                    gateway.razorpay(
                        "payment.captured",
                        payment_id=f"pay_b{n}",
                        order_id=f"order_b{n}",
                        amount_paise=100,
                    )
                    for n in range(1, args.orders + 1)
                )
                run = load(base, deliveries, workers=args.workers, until=lambda: False)
            print(f"SMTP down, webhooks: {run.summary()}")
            print(f"emails queued while SMTP was down: {pending(url)}")
            time.sleep(3)
            inbox = Inbox()
            controller = Controller(inbox, hostname="127.0.0.1", port=port)
            controller.start()
            started = time.perf_counter()
            while pending(url) > 0 and time.perf_counter() - started < 300:
                time.sleep(0.05)
            drained = time.perf_counter() - started
            time.sleep(1)
            controller.stop()
        finally:
            for sender in senders:
                sender.terminate()
                sender.wait(timeout=30)
    twice = sum(1 for n in inbox.ids.values() if n > 1)
    print(
        f"SMTP back: {sum(inbox.ids.values())} emails received ({len(inbox.ids)} distinct) "
        f"{drained:.1f} s after it returned, by {args.senders} workers; received twice: {twice}"
    )


if __name__ == "__main__":
    main()
