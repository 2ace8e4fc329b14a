"""`pip install 'payhooks[aio]'` is the async core for a framework payhooks has no module for
(Litestar, Quart, a bare ASGI app): a clean venv with it and no web framework takes deliveries
on an async pool through ``payhooks.aio.deliveries``, as docs/fastapi.md's "Another framework"
builds its door."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.acceptance.installing import ROOT, installed, venv_with

FRAMEWORKS = {"fastapi", "starlette", "uvicorn", "django", "flask", "litestar"}


@pytest.fixture(scope="module")
def aio(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return venv_with(tmp_path_factory, "aio", "{wheel}[aio]")


def test_the_aio_extra_brings_no_web_framework(aio: Path) -> None:
    assert not installed(aio) & FRAMEWORKS


DRIVE = """
import asyncio, json, sys
import psycopg
from examples.asgi_door import app

class Lifespan:  # the app's lifespan as a server runs it: one call, told startup, later shutdown

    def __init__(self):
        self.told, self.said, self.started = asyncio.Queue(), [], asyncio.Event()

    async def run(self):
        async def send(event):
            self.said.append(event["type"])
            self.started.set()
        await app({"type": "lifespan"}, self.told.get, send)

async def post(path, body, headers):
    chunks = [body[:10], body[10:]]
    sent = []
    async def receive():
        chunk = chunks.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}
    async def send(event):
        sent.append(event)
    scope = {"type": "http", "method": "POST", "path": path,
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers]}
    await app(scope, receive, send)
    return sent[0]["status"], json.loads(sent[1]["body"])

async def gone(path, body, headers):
    told = [{"type": "http.request", "body": body[:10], "more_body": True},
            {"type": "http.disconnect"}]
    sent = []
    async def receive():
        return told.pop(0)
    async def send(event):
        sent.append(event)
    scope = {"type": "http", "method": "POST", "path": path,
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers]}
    await app(scope, receive, send)
    return sent

async def main(body, headers):
    lifespan = Lifespan()
    running = asyncio.create_task(lifespan.run())
    await lifespan.told.put({"type": "lifespan.startup"})
    await asyncio.wait_for(lifespan.started.wait(), 60)
    answers = [await post("/webhooks/razorpay", body, headers) for _ in range(2)]
    answers.append(await post("/webhooks/razorpay", body + b" ", headers))
    answers.append(await post("/webhooks/razorpay", b"x" * 4_000_000, headers))
    answers.append(await post("/webhooks/nosuch", body, headers))
    assert await gone("/webhooks/razorpay", body, headers) == []  # no answer, nothing noted
    await lifespan.told.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(running, 60)
    return lifespan.said, [[status, answer.get("status") or answer.get("error")]
                               for status, answer in answers]

body, headers = json.loads(sys.argv[1])
said, answers = asyncio.run(main(body.encode(), headers))
with psycopg.connect(sys.argv[2]) as conn:
    paid = conn.execute("SELECT payment_id, amount_paise FROM shop_payments").fetchall()
    noted = conn.execute("SELECT count(*) FROM payhooks_deliveries").fetchone()[0]
frameworks = sorted(m for m in sys.modules if m.split(".")[0] in set(sys.argv[3:]))
print(json.dumps([said, answers, paid, noted, frameworks]))
"""


def test_the_documented_door_takes_deliveries_without_a_web_framework(
    aio: Path, database_url
) -> None:
    """``examples/asgi_door.py``, the door docs/fastapi.md's "Another framework" builds, driven
    as an ASGI server drives it: startup, deliveries in two chunks, shutdown."""
    from tests.factories import GATEWAY, KEYS

    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_aio1", order_id="order_aio", amount_paise=100
    )
    given = json.dumps([delivery.body.decode(), list(delivery.headers.items())])
    env = {"DATABASE_URL": database_url, "RAZORPAY_WEBHOOK_SECRET": KEYS.razorpay,
           "PATH": os.environ.get("PATH", "")}  # fmt: skip
    out = subprocess.run(
        [aio, "-c", DRIVE, given, database_url, *sorted(FRAMEWORKS)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    said, answers, paid, noted, frameworks = json.loads(out.stdout)
    assert said == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert answers == [
        [200, "processed"],
        [200, "duplicate"],
        [401, "signature_mismatch"],
        [413, "payload_too_large"],
        [404, "provider_not_configured"],
    ]
    assert paid == [["pay_aio1", 100]]
    assert noted == 5  # each request in the delivery log, its last lines written at shutdown
    assert frameworks == []
