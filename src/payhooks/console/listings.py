"""The console's list pages: the deliveries, payments and settlements lists with their
filters, their CSV exports, the Fetch of settlement reports, the disputes still open by
deadline, and the bulk replay of parked deliveries (docs/console.md, "Lists", "Exporting a
list", "Settlements", "Disputes", "Replaying many at once"). The data is ``lists``,
``export``, ``bulk`` and ``payhooks.intake.disputes``'; these are the routes, built on
``pages``' helpers like the core's other pages."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Annotated, TypeVar
from urllib.parse import urlencode

import anyio
from fastapi import Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from payhooks.console import actions, bulk, export, formats, lists
from payhooks.console.pages import (
    _HEADERS,
    MAX_FIELD_CHARS,
    Console,
    Field,
    Session,
    Unreadable,
    Views,
    _console,
    _redirect,
    csrf,
    notice_of,
    page,
    prefix_of,
    private,
    replay_one,
    run,
    signed,
    verified,
)
from payhooks.gateways import GATEWAYS
from payhooks.gateways._settlements import INDIA
from payhooks.intake import disputes
from payhooks.plumbing import db
from payhooks.plumbing.db import Connection
from payhooks.settlements import listing

router = private()

T = TypeVar("T")
Text = Annotated[str, Query(max_length=MAX_FIELD_CHARS)]
Moment = Annotated[str, Query(max_length=lists.MAX_TIME_CHARS)]
From = Annotated[str, Query(alias="from", max_length=lists.MAX_TIME_CHARS)]
FormFrom = Annotated[str, Form(alias="from", max_length=lists.MAX_TIME_CHARS)]
FormMoment = Annotated[str, Form(max_length=lists.MAX_TIME_CHARS)]
FormDay = Annotated[str, Form(max_length=10)]
SAID_CHARS = 2000
"""What the action log keeps of a fetch's summary."""
Count = Annotated[int | None, Query(ge=0, le=1_000_000)]


def _zone(request: Request) -> tzinfo:
    console: Console = _console(request)
    return console.zone


def _flag(text: str, word: str, name: str) -> bool:
    """Whether a filter that is either empty or ``word`` is ``word``."""
    if text.strip() not in ("", word):
        raise lists.BadFilter(f"The {name} filter is either empty or '{word}'.")
    return text.strip() == word


def _mismatch(text: str) -> bool:
    return _flag(text, "mismatch", "amount")


async def _delivery_filter(
    request: Request,
    gateway: Text = "",
    outcome: Text = "",
    amount: Text = "",
    confirmation: Text = "",
    start: From = "",
    to: Moment = "",
) -> lists.DeliveryFilter:
    """The deliveries' filter, the same query for the list and its export."""
    return lists.DeliveryFilter(
        gateway=lists.gateway_of(gateway, lists.LOGGED_GATEWAYS),
        answer=lists.choice_of(outcome, lists.ANSWERS, "answer"),
        mismatch=_mismatch(amount),
        waiting=_flag(confirmation, "waiting", "confirmation"),
        window=lists.window(start, to, _zone(request), datetime.now(UTC)),
    )


def _needs_refund(text: str, source: lists.Payments) -> bool:
    needed = _flag(text, "needed", "refund")
    if needed and source.needs_refund is None:
        raise lists.BadFilter("This console does not know which payments need a refund.")
    return needed


async def _payment_filter(
    request: Request,
    gateway: Text = "",
    status: Text = "",
    amount: Text = "",
    refund: Text = "",
    start: From = "",
    to: Moment = "",
) -> lists.PaymentFilter:
    """The payments' filter, the same query for the list and its export."""
    source = _console(request).views.payments
    return lists.PaymentFilter(
        gateway=lists.gateway_of(gateway, lists.PROVIDERS),
        status=lists.choice_of(status, source.statuses, "status"),
        mismatch=_mismatch(amount),
        needs_refund=_needs_refund(refund, source),
        window=lists.window(start, to, _zone(request), datetime.now(UTC)),
    )


DeliveriesChosen = Annotated[lists.DeliveryFilter, Depends(_delivery_filter)]
PaymentsChosen = Annotated[lists.PaymentFilter, Depends(_payment_filter)]


def _listed(
    request: Request,
    chosen: lists.Filter,
    rows: Sequence[object],
    older: str | None,
) -> dict[str, object]:
    """What a filtered list's page shows around its rows: the filter form's fields as the
    operator typed them, the query of the older rows, and the export's."""
    return {
        "rows": rows,
        "chosen": chosen,
        "typed": _typed(request, chosen.window),
        "more": older,
        "export": chosen.query(),
        "max_rows": export.MAX_ROWS,
    }


def _typed(request: Request, window: lists.Window) -> dict[str, str]:
    """A range's fields as the operator typed them: one left empty stays empty, never showing
    the start or end a list took for it."""
    zone = _zone(request)
    return {
        "from": lists.typed(window.start, zone) if request.query_params.get("from") else "",
        "to": lists.typed(window.end, zone) if window.end_given else "",
    }


# --- deliveries ------------------------------------------------------------------------------


@router.get("/deliveries")
async def deliveries(
    request: Request,
    chosen: DeliveriesChosen,
    before: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
) -> HTMLResponse:
    """The delivery log, filtered, newest first, ``lists.PAGE`` lines a page."""
    rows = await run(request, lists.deliveries, chosen, before=before)
    more = rows[-1].id if len(rows) == lists.PAGE else None
    context = {
        **_listed(request, chosen, rows, chosen.query(before=more) if more else None),
        "gateways": lists.LOGGED_GATEWAYS,
        "answers": lists.ANSWERS,
        "replay_query": urlencode({k: v for k, v in _bulk_query(chosen).items() if v}),
    }
    return page(request, "deliveries.html", context)


def _bulk_query(chosen: lists.DeliveryFilter) -> dict[str, str]:
    window = chosen.window
    return {
        "gateway": chosen.gateway if chosen.gateway in lists.PROVIDERS else "",
        "from": lists.exact(window.start) if window.start else "",
        "to": lists.exact(window.end) if window.end_given else "",
    }


@router.get("/deliveries.csv")
async def deliveries_csv(request: Request, chosen: DeliveriesChosen) -> Response:
    """The filtered delivery log as CSV, ``export.MAX_ROWS`` lines at most."""

    async def read(after: lists.Line | None, limit: int) -> list[lists.Line]:
        before = None if after is None else after.id
        return await run(request, lists.deliveries, chosen, before=before, limit=limit)

    zone = _zone(request)
    return _csv(
        "deliveries", export.DELIVERY_COLUMNS, read, lambda r: export.delivery_row(r, zone), zone
    )


# --- payments --------------------------------------------------------------------------------


@router.get("/payments")
async def payments(request: Request, chosen: PaymentsChosen, before: Text = "") -> HTMLResponse:
    """The payments the app's source knows, filtered, newest first, ``lists.PAGE`` a page."""
    source = _console(request).views.payments
    rows = await run(request, source.read, chosen, lists.cursor_of(before), lists.PAGE)
    more = rows[-1].cursor if len(rows) == lists.PAGE else None
    context = {
        **_listed(request, chosen, rows, chosen.query(before=more) if more else None),
        "gateways": lists.PROVIDERS,
        "statuses": source.statuses,
        "needs_refund": source.needs_refund,
    }
    return page(request, "payments.html", context)


@router.get("/payments.csv")
async def payments_csv(request: Request, chosen: PaymentsChosen) -> Response:
    """The filtered payments as CSV, ``export.MAX_ROWS`` at most."""
    source = _console(request).views.payments

    async def read(after: lists.Payment | None, limit: int) -> list[lists.Payment]:
        before = None if after is None else (after.at, after.key)
        return await run(request, source.read, chosen, before, limit)

    zone = _zone(request)
    statuses = source.statuses
    return _csv(
        "payments",
        export.PAYMENT_COLUMNS,
        read,
        lambda r: export.payment_row(r, zone, statuses),
        zone,
    )


@router.get("/disputes")
async def open_disputes(request: Request, gateway: Text = "") -> HTMLResponse:
    """The disputes not yet decided, the nearest deadline first, each with where to answer
    it: the gateway's dashboard."""
    chosen = lists.gateway_of(gateway, lists.PROVIDERS)
    rows, addresses = await run(request, _open_disputes, _console(request).views, chosen)
    context = {
        "rows": rows,
        "addresses": addresses,
        "now": datetime.now(UTC),
        "chosen": chosen,
        "gateways": lists.PROVIDERS,
        "dashboards": {p.value: g for p, g in GATEWAYS.items() if g.disputes_dashboard},
        "max_rows": disputes.MAX_LISTED,
    }
    return page(request, "disputes.html", context)


def _open_disputes(
    conn: db.Connection, views: Views, gateway: str | None
) -> tuple[list[disputes.Dispute], dict[tuple[str, str], str]]:
    """The open disputes, and where each one's payment's story is told (the app's own page
    for it: the reference shop's cart)."""
    rows = disputes.open_disputes(conn, gateway)
    addresses = {}
    for row in rows:
        found = views.story_address(conn, row.provider, row.gateway_order_id, row.payment_id)
        if found is not None:
            addresses[(row.provider, row.dispute_id)] = found
    return rows, addresses


def _csv(
    kind: str,
    columns: Sequence[str],
    read: Callable[[T | None, int], Awaitable[list[T]]],
    row_of: Callable[[T], list[export.Cell]],
    zone: tzinfo,
) -> StreamingResponse:
    """The rows ``read`` gives, a batch at a time, written as they come: the response holds
    one batch in memory, never the export."""

    async def written() -> AsyncIterator[str]:
        yield export.BOM + export.text([columns])
        sent, last = 0, None
        while sent < export.MAX_ROWS:
            want = min(export.READ_ROWS, export.MAX_ROWS - sent)
            rows = await read(last, want)
            if rows:
                yield export.text(row_of(row) for row in rows)
            sent += len(rows)
            if len(rows) < want:
                return
            last = rows[-1]

    name = export.filename(kind, datetime.now(UTC), zone)
    response = StreamingResponse(written(), media_type="text/csv; charset=utf-8")
    response.headers.update(_HEADERS)
    response.headers["content-disposition"] = f'attachment; filename="{name}"'
    return response


# --- settlements -----------------------------------------------------------------------------


async def _settlement_filter(
    request: Request, gateway: Text = "", start: From = "", to: Moment = ""
) -> lists.SettlementFilter:
    """The settlements' filter, the same query for the list and its export."""
    return lists.SettlementFilter(
        gateway=lists.gateway_of(gateway, lists.PROVIDERS),
        window=lists.window(start, to, _zone(request), datetime.now(UTC),
                            span=lists.SETTLEMENT_SPAN),
    )  # fmt: skip


SettlementsChosen = Annotated[lists.SettlementFilter, Depends(_settlement_filter)]


def _settlements(
    conn: Connection, chosen: lists.SettlementFilter, after: tuple[datetime, str, str] | None
) -> dict[str, object]:
    window = chosen.window
    start = window.start or window.end - lists.SETTLEMENT_SPAN
    return {
        "rows": listing.payouts(conn, start, window.end, provider=chosen.gateway, after=after),
        "totals": listing.totals(conn, start, window.end, provider=chosen.gateway),
        "unsettled": listing.unsettled(conn, provider=chosen.gateway),
        "unmatched": listing.unmatched_lines(conn, provider=chosen.gateway),
        "unreadable": listing.unreadable(conn, provider=chosen.gateway),
    }


@router.get("/settlements")
async def settlements(
    request: Request,
    chosen: SettlementsChosen,
    at: Moment = "",
    after_provider: Text = "",
    after_id: Text = "",
) -> HTMLResponse:
    """The payouts of the range with their totals, newest first, ``listing.PAGE`` a page;
    the captures flagged unsettled, the lines naming no known payment and the report lines
    payhooks could not read; the Fetch form."""
    after = _cursor(request, at, after_provider, after_id)
    found = await run(request, _settlements, chosen, after)
    rows = found["rows"]
    assert isinstance(rows, list)
    more = rows[-1].cursor if len(rows) == listing.PAGE else None
    older = None
    if more is not None:
        older = chosen.query(at=lists.exact(more[0]), after_provider=more[1], after_id=more[2])
    context = {
        **found,
        **_listed(request, chosen, rows, older),
        "gateways": lists.PROVIDERS,
        "can_fetch": _console(request).views.fetch_settlements is not None,
        "yesterday": (datetime.now(UTC).astimezone(INDIA) - timedelta(days=1)).date(),
        **notice_of(request),
    }
    return page(request, "settlements.html", context)


def _cursor(
    request: Request, at: str, provider: str, settlement_id: str
) -> tuple[datetime, str, str] | None:
    moment = lists.moment(at, _zone(request), "at")
    return None if moment is None else (moment, provider, settlement_id)


@router.get("/settlements.csv")
async def settlements_csv(request: Request, chosen: SettlementsChosen) -> Response:
    """Every line of the filtered payouts as CSV, ``export.MAX_ROWS`` at most."""
    window = chosen.window
    start = window.start or window.end - lists.SETTLEMENT_SPAN

    async def read(after: listing.Entry | None, limit: int) -> list[listing.Entry]:
        return await run(request, listing.lines_in, start, window.end, provider=chosen.gateway,
                         after=after, limit=limit)  # fmt: skip

    zone = _zone(request)
    return _csv(
        "settlements", export.SETTLEMENT_COLUMNS, read, lambda r: export.settlement_row(r, zone),
        zone,
    )  # fmt: skip


@router.get("/settlements/{provider}/{settlement_id:path}")
async def settlement(request: Request, provider: str, settlement_id: str) -> HTMLResponse:
    """One payout (what the gateway paid out, and whether its lines add up to it) and its
    lines, each linked to its payment's timeline."""
    lines = await run(request, listing.lines, provider, settlement_id)
    if not lines:
        message = "No such settlement's lines are recorded (fetch its days to record them)."
        return page(request, "error.html", {"message": message}, status=404)
    payout = await run(request, listing.payout, provider, settlement_id)
    return page(request, "settlement.html", {"lines": lines, "first": lines[0], "payout": payout})


@router.post("/settlements/fetch", dependencies=[Depends(csrf)])
async def fetch_settlements(
    request: Request, session: Session, start: FormDay, end: FormDay
) -> Response:
    """The gateways' settlement reports for India's days ``start`` to ``end``, fetched as
    ``payhooks settlements`` fetches them, recorded in the action log with what they held."""
    fetch = _console(request).views.fetch_settlements
    if fetch is None:
        raise Unreadable("This console does not fetch settlements: run `payhooks settlements`.")
    try:
        days = date.fromisoformat(start), date.fromisoformat(end)
        tally = await anyio.to_thread.run_sync(fetch, *days)
    except ValueError:
        refused = signed(request, {"notice": actions.Done.NO_FETCH.value})
        return _redirect(f"{prefix_of(request.scope)}/settlements?{refused}")
    done = actions.Done.FETCH_FAILED if tally.failures else actions.Done.FETCHED
    said = told(tally.summary())
    await run(request, actions.record, session.operator, "fetch_settlements", None,
              f"{start} to {end}", actions.Result(done=done), said)  # fmt: skip
    notice = signed(request, {"notice": done.value})
    return _redirect(f"{prefix_of(request.scope)}/settlements?{notice}")


def told(summary: str) -> str:
    """A fetch's summary on one line of the action log: its heading, then each gateway's
    part (its failure within it) and the review's, `` | `` between them."""
    head, *parts = [" ".join(line.split()) for line in summary.splitlines() if line.strip()]
    return " ".join([head, " | ".join(parts)] if parts else [head])[:SAID_CHARS]


# --- replaying many at once ------------------------------------------------------------------


def _chosen(request: Request, gateway: str, start: str, end: str, as_of: datetime) -> bulk.Chosen:
    return bulk.Chosen(
        gateway=lists.gateway_of(gateway, lists.PROVIDERS),
        window=lists.window(start, end, _zone(request), as_of, span=None),
        as_of=as_of,
    )


def _as_of(text: str, request: Request) -> datetime | None:
    return lists.moment(text, _zone(request), "as_of")


def _described(chosen: bulk.Chosen, request: Request) -> str:
    """The filter in words: ``parked Razorpay deliveries received from … before …``."""
    zone = _zone(request)
    gateway = f"{formats.gateway_title(chosen.gateway)} " if chosen.gateway else ""
    start = chosen.window.start
    since = f" from {formats.when(start, zone)}" if start else ""
    return f"parked {gateway}deliveries received{since} before {formats.when(chosen.end, zone)}"


_DONE = ("replayed", "applied", "waiting")
"""What a bulk replay's submit came to, as its redirect carries it (signed)."""


@router.get("/parked/bulk")
async def bulk_form(
    request: Request,
    gateway: Text = "",
    start: From = "",
    to: Moment = "",
    as_of: Moment = "",
    replayed: Count = None,
    applied: Count = None,
    waiting: Count = None,
) -> HTMLResponse:
    """How many parked deliveries a filter takes, and the form that replays them; after a
    submit (``as_of`` given), what it did and how many are left."""
    confirmed = _as_of(as_of, request)
    if verified(request, _DONE) is None:  # a submit's own redirect only
        replayed = applied = waiting = None
    moment = confirmed if confirmed is not None else await run(request, bulk.now)
    chosen = _chosen(request, gateway, start, to, moment)
    left = await run(request, bulk.left, chosen)
    context = {
        "chosen": chosen,
        "described": _described(chosen, request),
        "left": left,
        "batch": bulk.BATCH,
        "fields": chosen.fields(),
        "gateways": lists.PROVIDERS,
        "typed": _typed(request, chosen.window),
        "confirmed": confirmed is not None,
        "replayed": replayed,
        "applied": applied,
        "waiting": waiting or 0,
    }
    return page(request, "bulk.html", context)


@router.post("/parked/bulk", dependencies=[Depends(csrf)])
async def bulk_replay(
    request: Request,
    session: Session,
    as_of: FormMoment,
    gateway: Field = "",
    start: FormFrom = "",
    to: FormMoment = "",
) -> Response:
    """Replay the next ``bulk.BATCH`` of the deliveries confirmed, each as the Replay button
    does (recorded per delivery), then the whole submit as one line of the action log."""
    confirmed = _as_of(as_of, request)
    if confirmed is None:
        raise Unreadable("The moment the replay was confirmed is missing.")
    chosen = _chosen(request, gateway, start, to, confirmed)
    taken = await run(request, bulk.next_batch, chosen)
    results = [await replay_one(request, session.operator, p, e) for p, e in taken]
    done = {
        "replayed": len(results),
        "applied": sum(result.done is actions.Done.APPLIED for result in results),
        "waiting": sum(result.done is actions.Done.CONFIRMING for result in results),
    }
    left = await run(request, bulk.left, chosen)
    waiting = f"{done['waiting']} waiting for the status API, " if done["waiting"] else ""
    summary = f"{done['replayed']} replayed, {done['applied']} applied, {waiting}{left} left"
    await run(
        request,
        actions.record,
        session.operator,
        "bulk_replay",
        chosen.gateway,
        _described(chosen, request),
        actions.Result(done=actions.Done.BULK_REPLAYED),
        summary,
    )
    fields = {k: v for k, v in chosen.fields().items() if v}
    query = urlencode(fields) + "&" + signed(request, done)
    return _redirect(f"{prefix_of(request.scope)}/parked/bulk?{query}")


__all__ = ["router"]
