"""Junk PayU forms against genuine webhooks: webhook latency with and without junk senders.

    .venv/bin/python bench/junk_forms.py [--junk-senders 4] [--seconds 10] [--workers 2]

One `payhooks serve` on a fresh database (DATABASE_URL's server when set, else embedded).
Genuine senders post signed PayU success posts for references no checkout has (each one a
whole webhook transaction, answered 200 `parked`). Junk senders post unauthenticated forms
back to back: either just under PayU's body bound (read, parsed, refused 401) or 1 MiB
(refused 413 on its declared length, unread). Prints figures only; docs/security.md says why
the bound and the thread hop exist.
"""

from __future__ import annotations

import argparse
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

from _load import KEYS, Http, Operation, Run, database, drive, post, service

from payhooks.gateways import payu
from payhooks.sim.gateway import Gateway

GATEWAY = Gateway(KEYS)


def junk_form(size: int) -> bytes:
    """A form of ``size`` bytes that is slow to decode: one value of percent-escapes."""
    return b"junk=" + b"%41" * ((size - 5) // 3)


UNDER_BOUND = junk_form(payu.MAX_BODY_BYTES)
OVER_BOUND = junk_form(1024 * 1024)  # the bound before PayU had its own: read and parsed then
FORM = {"content-type": "application/x-www-form-urlencoded"}


def genuine(prefix: str) -> Iterator[Operation]:
    for n in itertools.count():
        yield post(GATEWAY.payu(txnid=f"{prefix}-{n}", mihpayid=str(n), amount="1.00"))


def junk_sender(base: str, body: bytes, stop: threading.Event, seen: Counter[int]) -> None:
    client = Http(base)
    try:
        while not stop.is_set():
            try:
                status, _ = client.request("POST", "/webhooks/payu", body, FORM)
            except ConnectionError:  # refused unread, the server may close the connection
                client.close()
                client = Http(base)
                status = 0
            seen[status] += 1
    finally:
        client.close()


def phase(base: str, label: str, junk: bytes | None, args: argparse.Namespace) -> None:
    stop = threading.Event()
    seen: Counter[int] = Counter()
    senders = [
        threading.Thread(target=junk_sender, args=(base, junk, stop, seen))
        for _ in range(args.junk_senders if junk else 0)
    ]
    for sender in senders:
        sender.start()
    deadline = time.monotonic() + args.seconds
    until: Callable[[], bool] = lambda: time.monotonic() > deadline  # noqa: E731
    run: Run = drive([base], genuine(label), workers=args.workers, until=until)
    stop.set()
    for sender in senders:
        sender.join()
    print(f"{label}: genuine median {run.percentile(50):.1f} ms; {run.summary()}")
    if junk:
        print(f"    junk: {sum(seen.values())} posts, statuses {dict(sorted(seen.items()))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junk-senders", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, default=2, help="genuine senders")
    args = parser.parse_args()
    with database() as url, service(url) as base:
        phase(base, "no-junk", None, args)
        phase(base, f"junk-{len(UNDER_BOUND) // 1024}KiB", UNDER_BOUND, args)
        phase(base, "junk-1MiB", OVER_BOUND, args)


if __name__ == "__main__":
    main()
