"""The storm's sending side against misbehaving endpoints: it never hangs, never miscounts."""

from __future__ import annotations

import http.server
import threading

from payhooks.events import Provider
from payhooks.sim.gateway import Purchase
from payhooks.sim.storm import Gatekeeper, Planned, StormOptions
from tests.factories import GATEWAY

BUY = Purchase(
    provider=Provider.CASHFREE,
    cart_id="c",
    reference="r",
    amount_paise=100,
    items={},
)


class MaintenancePage(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"<html>down for maintenance</html>")

    def log_message(self, *args: object) -> None:
        pass


def test_a_200_that_is_not_payhooks_answer_is_retried_then_reported_never_hangs():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), MaintenancePage)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    delivery = GATEWAY.payu(txnid="t", mihpayid="1", amount="1.00")
    options = StormOptions(concurrency=4, time_scale=1e9)
    try:
        keeper = Gatekeeper(f"http://127.0.0.1:{server.server_address[1]}", options)
        runner = threading.Thread(
            target=keeper.run, args=([Planned(delivery=delivery, purchase=BUY, at_s=0)],)
        )
        runner.start()
        runner.join(timeout=30)
    finally:
        server.shutdown()
    assert not runner.is_alive()
    assert keeper.tally.answers == {"http 200 unreadable": 5}  # first try and PayU's 4 retries
    assert len(keeper.tally.gave_up) == 1
