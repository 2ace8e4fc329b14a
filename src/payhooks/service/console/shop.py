"""The shop's views in the core console: its search, its carts' timelines, its dead letters,
and a replay through the shop's state machine (``payhooks.service.application``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated
from urllib.parse import quote, urlencode

import jinja2
from fastapi import Depends, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, Response

from payhooks.console import Count, Fetch, Link, Views, lists, make
from payhooks.console.actions import Done, Parked, Replay
from payhooks.console.formats import DEFAULT_TIMEZONE
from payhooks.console.pages import (
    Candidate,
    Elsewhere,
    Field,
    Mounted,
    Session,
    csrf,
    go_back,
    moved_to,
    notice_of,
    page,
    private,
    run,
)
from payhooks.events import Provider
from payhooks.gateways import GATEWAYS, Adapter, title_of
from payhooks.intake.ingest import Receipt
from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import NotFound
from payhooks.service import application, mail
from payhooks.service.console import actions, payments, search, stories
from payhooks.service.errors import InvalidAddress

PREFIX = "/console"
SEARCH_HINT = (
    "Order id, cart id, gateway order id, payment id, delivery key, customer email, "
    "bank reference (UTR/RRN), dispute id or refund id"
)

_shop = private()


def install(
    app: FastAPI,
    adapters: Mapping[Provider, Adapter],
    reconciliation_off: Sequence[Provider] = (),
    *,
    timezone: str = DEFAULT_TIMEZONE,
    fetch_settlements: Fetch | None = None,
) -> None:
    """The console at ``/console``; its pool is ``app.state.console_pool`` (at most
    ``CONNECTIONS`` connections), opened by the app's lifespan. Times are shown in
    ``timezone``."""
    views = Views(
        replay=_replay_with(adapters),
        gateways=[p.value for p in adapters],
        find=_find,
        search_hint=SEARCH_HINT,
        prefix_hint=(
            f"A customer email is also found by its first {search.MIN_PREFIX} characters or "
            "more; every other identifier must be given whole."
        ),
        max_query_chars=search.MAX_QUERY_CHARS,
        reference_address=_reference_address,
        story_address=_story_address,
        order_elsewhere=_cart_of_order,
        counts=_counts,
        nav=[("Dead letters", "/dead")],
        router=_shop,
        templates=jinja2.PackageLoader("payhooks.service.console", "templates"),
        reconciliation_off=[p.value for p in reconciliation_off],
        parked_note="The worker retries them every minute.",
        parked_why="no checkout",
        timezone=timezone,
        payments=payments.SHOP_PAYMENTS,
        payments_note=payments.NOTE,
        adapters=adapters,
        candidates=_candidates,
        link_to="/parked/link",
        fetch_settlements=fetch_settlements,
    )
    console = make(views, lambda: app.state.console_pool)
    console.state.adapters = adapters
    app.router.routes.append(Mounted(PREFIX, console))


def _replay_with(adapters: Mapping[Provider, Adapter]) -> Replay:
    """A stored delivery through the shop's state machine again (``application.replay``): the
    path of the Replay button, and of a delivery replayed once linked to its cart."""

    def replay(conn: Connection, provider: str, event_id: str) -> Receipt:
        return application.replay(conn, adapters, event_id=event_id, provider=provider)

    return replay


def _find(conn: Connection, text: str) -> list[Link]:
    """The search's results; and when an email has more carts than it lists, a link to them
    all, a page at a time."""
    results = search.search(conn, text)
    links = [
        Link(matched=found.matched.value, label=_label(found), address=address(found))
        for found in results
    ]
    if len(results) < search.MAX_RESULTS:
        return links
    total = search.carts_with_email(conn, text)
    if total > search.MAX_RESULTS:
        links.append(
            Link(
                matched=search.Matched.EMAIL.value,
                label=f"every cart of this email, {lists.PAGE} a page",
                address=f"/carts?{urlencode({'email': text})}",
                more=f"The newest {search.MAX_RESULTS} of the {total} carts of this email "
                "are listed:",
            )
        )
    return links


def _label(found: search.Result) -> str:
    if found.cart_id:
        return f"cart {found.cart_id}" + (f" ({found.email})" if found.email else "")
    if found.reference:
        return f"{title_of(found.provider or '')} reference {found.reference} (no checkout)"
    return f"{title_of(found.provider or '')} delivery {found.event_id} (no order)"


def address(found: search.Result) -> str:
    """Where a search result leads: its cart, its reference's timeline, or its delivery."""
    if found.cart_id:
        return f"/carts/{quote(found.cart_id, safe='')}"
    if found.reference:
        return _reference_address(found.provider or "", found.reference)
    return f"/deliveries/{found.provider}/{quote(found.event_id or '', safe='')}"


def _reference_address(provider: str, reference: str) -> str:
    return f"/references/{provider}/{quote(reference, safe='')}"


def _story_address(
    conn: Connection, provider: str, reference: str | None, payment_id: str | None
) -> str | None:
    """A stored delivery's timeline: its cart's, else its reference's (no checkout yet)."""
    cart_id = search.cart_of(conn, provider, reference, payment_id)
    if cart_id is not None:
        return f"/carts/{quote(cart_id, safe='')}"
    return _reference_address(provider, reference) if reference else None


def _cart_of_order(
    conn: Connection, provider: str, gateway_order_id: str, payment_ids: Sequence[str]
) -> Elsewhere | None:
    """A gateway order's cart: its checkout's, else its first payment's."""
    first = payment_ids[0] if payment_ids else None
    cart_id = search.cart_of(conn, provider, gateway_order_id, first)
    if cart_id is None:
        return None
    return Elsewhere(
        words="The shop's checkout of this order is cart",
        label=cart_id,
        address=f"/carts/{quote(cart_id, safe='')}",
        after=": its page tells the cart, its order and its emails.",
    )


def _candidates(conn: Connection, rows: Sequence[Parked]) -> dict[tuple[str, str], Candidate]:
    by_key = {(row.provider, row.event_id): row for row in rows}
    return {
        key: Candidate(
            value=found.cart_id,
            label=f"cart {found.cart_id}",
            address=f"/carts/{quote(found.cart_id, safe='')}",
            why=actions.why(found, by_key[key]),
        )
        for key, found in actions.candidates(conn, rows).items()
    }


def _counts(conn: Connection) -> list[Count]:
    number = actions.dead_count(conn)
    return [
        Count(key="dead", number=number, one="dead letter", many="dead letters", address="/dead")
    ]


def _adapters(request: Request) -> Mapping[Provider, Adapter]:
    adapters: Mapping[Provider, Adapter] = request.app.state.adapters
    return adapters


@_shop.get("/carts/{cart_id}")
async def cart(request: Request, cart_id: str) -> HTMLResponse:
    try:
        story = await run(request, stories.of_cart, cart_id, _adapters(request))
    except NotFound as exc:
        return _not_found(request, exc)
    return _story_page(request, story)


def _not_found(request: Request, exc: NotFound) -> HTMLResponse:
    """Said without the address: a link's text shown back would put any sentence its author
    chose inside the console, and a long one past the screen's edge."""
    return page(request, "error.html", {"message": f"No such {exc.kind} is recorded."},
                status=404)  # fmt: skip


@_shop.get("/carts")
async def carts_of_email(
    request: Request,
    email: Annotated[str, Query(max_length=search.MAX_QUERY_CHARS)] = "",
    before: Annotated[str, Query(max_length=search.MAX_QUERY_CHARS + 64)] = "",
) -> HTMLResponse:
    """Every cart of a customer email (any case), newest first, ``lists.PAGE`` a page: the
    search lists the newest ``search.MAX_RESULTS`` and links here for the rest."""
    email = email.strip()
    if not email:
        message = "Name the customer email whose carts to list."
        return page(request, "error.html", {"message": message}, status=400)
    cursor = lists.cursor_of(before)

    def read(conn: Connection) -> tuple[int, list[search.Cart]]:
        found = search.carts_of_email(conn, email, cursor, lists.PAGE)
        return search.carts_with_email(conn, email), found

    total, rows = await run(request, read)
    more = rows[-1].cursor if len(rows) == lists.PAGE else None
    context = {
        "email": email,
        "total": total,
        "rows": rows,
        "query": email,
        "more": urlencode({"email": email, "before": more}) if more else None,
    }
    return page(request, "carts.html", context)


@_shop.get("/references/{provider}/{reference:path}", response_model=None)
async def reference(request: Request, provider: str, reference: str) -> Response:
    """A gateway reference's deliveries and settlement; linked to the cart whose checkout it
    is, when the shop knows one (a payout line links here by its gateway order). Once the
    purge has taken its deliveries, its cart's page, which keeps telling of its payments."""
    adapters = _adapters(request)

    def read(conn: Connection) -> tuple[stories.Story | None, str | None]:
        cart_id = search.cart_of(conn, provider, reference, None)
        try:
            return stories.of_reference(conn, provider, reference, adapters), cart_id
        except NotFound:
            if cart_id is None:
                raise
            return None, cart_id

    try:
        story, cart_id = await run(request, read)
    except NotFound as exc:
        return _not_found(request, exc)
    if story is None:
        return moved_to(request, f"/carts/{quote(cart_id or '', safe='')}")
    return _story_page(request, story, cart_id=cart_id)


def _story_page(
    request: Request, story: stories.Story, *, cart_id: str | None = None
) -> HTMLResponse:
    refundable = [p.value for p, gateway in GATEWAYS.items() if gateway.sends_refunds]
    context = {"story": story, "refundable": refundable, "cart_id": cart_id}
    return page(request, "story.html", {**context, **notice_of(request)})


@_shop.get("/dead")
async def dead(request: Request) -> HTMLResponse:
    rows = await run(request, actions.dead_letters)
    total = await run(request, actions.dead_count)
    return page(request, "dead.html", {"rows": rows, "total": total, **notice_of(request)})


_LISTED = rf"^[1-9][0-9]{{0,17}}(,[1-9][0-9]{{0,17}}){{0,{actions.DEAD_PAGE - 1}}}$"
"""The ids of the dead letters a page listed, comma-separated (within ``bigint``)."""


@_shop.post("/dead/retry", dependencies=[Depends(csrf)])
async def retry(
    request: Request,
    session: Session,
    message_id: Annotated[int, Form(ge=1, le=2**63 - 1)],
    back: Field = "",
) -> Response:
    result = await run(request, actions.retry_dead_letter, message_id, operator=session.operator)
    return go_back(request, back or "/dead", result.done)


@_shop.post("/dead/retry-all", dependencies=[Depends(csrf)])
async def retry_all(
    request: Request,
    session: Session,
    listed: Annotated[str, Form(max_length=20 * actions.DEAD_PAGE, pattern=_LISTED)],
    confirm: Field = "",
    back: Field = "",
) -> Response:
    """Every dead letter the page listed queued again: the box ticked, each one recorded."""
    if confirm != "yes":
        return go_back(request, back or "/dead", Done.NOT_CONFIRMED)
    ids = [int(n) for n in listed.split(",")]
    result = await run(request, actions.retry_all, ids, operator=session.operator)
    return go_back(request, back or "/dead", result.done)


@_shop.post("/dead/readdress", dependencies=[Depends(csrf)])
async def readdress(
    request: Request,
    session: Session,
    message_id: Annotated[int, Form(ge=1, le=2**63 - 1)],
    recipient: Annotated[str, Form(max_length=320)],
    confirm: Field = "",
    back: Field = "",
) -> Response:
    """A dead-lettered email sent again to a corrected address: checked as a cart's address
    is, the box ticked, recorded with the operator."""
    try:
        address = mail.checked_address(recipient.strip())
    except InvalidAddress as exc:
        message = f"That address cannot be mailed: {exc.reason.rstrip('.')}. Nothing was changed."
        told = {"message": message, "heading": "Not sent again",
                "back_path": "/dead", "back_label": "Back to dead letters"}  # fmt: skip
        return page(request, "error.html", told, status=400)
    if confirm != "yes":
        return go_back(request, back or "/dead", Done.NOT_CONFIRMED)
    result = await run(request, actions.readdress, message_id, address, operator=session.operator)
    return go_back(request, back or "/dead", result.done)


@_shop.post("/parked/link", dependencies=[Depends(csrf)])
async def link(
    request: Request,
    session: Session,
    provider: Field,
    event_id: Field,
    cart_id: Annotated[str, Form(max_length=64)],
    confirm: Field = "",
    back: Field = "",
) -> Response:
    """Link a parked delivery to a cart (checked out under its reference), then replay it:
    the box ticked, recorded with the operator."""
    about = (provider, event_id)
    if confirm != "yes":
        return go_back(request, back or "/parked", Done.NOT_CONFIRMED, about=about)
    adapters = _adapters(request)
    result = await run(
        request,
        actions.link_parked,
        _replay_with(adapters),
        adapters,
        provider=provider,
        event_id=event_id,
        cart_id=cart_id.strip(),
        operator=session.operator,
    )
    return go_back(request, back or "/parked", result.done, about=about, why=result.why)


@_shop.post("/payments/refund", dependencies=[Depends(csrf)])
async def refund(
    request: Request,
    session: Session,
    provider: Field,
    payment_id: Field,
    confirm: Field = "",
    back: Field = "",
) -> Response:
    """Refund a payment flagged for a refund: the box ticked, recorded with the operator."""
    if confirm != "yes":
        return go_back(request, back or "/", Done.NOT_CONFIRMED)
    result = await run(
        request, actions.request_refund, provider, payment_id, operator=session.operator
    )
    return go_back(request, back or "/", result.done)
