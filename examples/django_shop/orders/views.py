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
    answer = receive(request, "payu")
    if answer.status_code != 200:
        return HttpResponse("We could not confirm this payment yet.", status=answer.status_code)
    order = json.loads(answer.content).get("order_id")
    return HttpResponse(f"Thank you: your payment is received (order {order or 'pending'}).")
