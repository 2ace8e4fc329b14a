"""payhooks' log lines as JSON (``payhooks.plumbing.logs``): the event name and every field a
merchant's app would otherwise not see (Python's default output prints the name alone)."""

from __future__ import annotations

import json
import logging

import pytest

from payhooks.plumbing import logs


@pytest.fixture
def restored():
    root = logging.getLogger("payhooks")
    kept = (root.handlers[:], root.level, root.propagate)
    yield
    root.handlers[:], root.level, root.propagate = kept


def test_a_line_carries_the_event_and_its_fields():
    record = logging.makeLogRecord({
        "name": "payhooks.fastapi", "levelname": "WARNING", "msg": "webhook_rejected",
        "provider": "razorpay", "status": 401, "reason": "signature_mismatch",
    })  # fmt: skip
    line = json.loads(logs.JsonFormatter().format(record))
    assert {k: line[k] for k in ("level", "logger", "event", "provider", "status", "reason")} == {
        "level": "warning", "logger": "payhooks.fastapi", "event": "webhook_rejected",
        "provider": "razorpay", "status": 401, "reason": "signature_mismatch",
    }  # fmt: skip


def test_configure_gives_every_payhooks_logger_json_lines_on_stderr(restored, capsys):
    logs.configure()
    logging.getLogger("payhooks.flask").warning(
        "webhook_rejected", extra={"provider": "payu", "reason": "signature_mismatch"}
    )
    logging.getLogger("payhooks.flask").debug("not_shown")
    [line] = capsys.readouterr().err.splitlines()
    assert json.loads(line)["reason"] == "signature_mismatch"


def test_a_failure_is_logged_with_its_traceback_and_its_cause_returned_cut(caplog):
    log = logging.getLogger("payhooks.test")
    try:
        raise RuntimeError("x" * 600)
    except RuntimeError as exc:
        reason = logs.failure_logged(log, "item_failed", exc, 40, provider="payu")
    [record] = caplog.records
    assert (record.getMessage(), record.provider, record.error) == ("item_failed", "payu", reason)
    assert record.exc_info is not None
    assert reason == ("RuntimeError: " + "x" * 600)[:40]


def test_a_failure_is_logged_where_it_was_caught_not_in_the_helper(caplog):
    """A merchant's formatter or error tracker groups by ``funcName`` and ``lineno``: the record
    names the pass that caught the failure."""
    log = logging.getLogger("payhooks.test")

    def the_pass() -> None:
        try:
            raise RuntimeError("boom")
        except RuntimeError as exc:
            logs.failure_logged(log, "item_failed", exc)

    the_pass()
    [record] = caplog.records
    assert (record.funcName, record.module) == ("the_pass", "test_logs")
