"""PayU's return page: the signed result form PayU has the customer's browser post to ``surl``
and ``furl``, handed to payhooks' own view (verified, claimed, applied once, whichever of it and
PayU's server post comes first), then a page for the customer."""

from __future__ import annotations

import json

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from payhooks.django.views import receive


@csrf_exempt  # PayU's post carries no CSRF token: its hash is the proof
@transaction.non_atomic_requests  # the payhooks view opens its own transaction, never inside one
def payu_return(request: HttpRequest) -> HttpResponse:
    answer = receive(request, "payu")  # the exact bytes: verified, claimed, applied once
    if answer.status_code != 200:
        return HttpResponse("We could not confirm this payment yet.", status=answer.status_code)
    # Verified now: PayU's hash covers txnid and status (providers.md, "PayU's payment states")
    order, status = request.POST.get("txnid"), request.POST.get("status", "").lower()
    said = json.loads(answer.content)["status"]
    if said == "confirming":
        return HttpResponse(f"We are confirming your payment for order {order} with PayU.")
    if status == "failure":  # furl
        return HttpResponse(f"Your payment for order {order} did not go through.")
    if status != "success" or request.POST.get("unmappedstatus", "").lower() == "auth":
        # pending at the bank, or authorised and debited, not captured: neither failed
        return HttpResponse(
            f"Your payment for order {order} is being completed: we will write to you."
        )
    if said in ("parked", "ignored"):  # not applied (no such order, another amount): a person
        return HttpResponse(
            f"We have your payment for order {order} and are checking it: we will write to you."
        )
    return HttpResponse(f"Thank you: your payment for order {order} is received.")
