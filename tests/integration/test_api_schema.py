"""Schemathesis against the service's own OpenAPI schema: no input to /api yields a 5xx."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payhooks.service.web import create_app
from tests.factories import SETTINGS

SCHEMA = schemathesis.openapi.from_dict(
    create_app(SETTINGS, api_token="schema-only", url="postgresql://unused").openapi()
)
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
CASES = st.one_of([operation.as_strategy() for operation in OPERATIONS])


def test_schema_covers_the_whole_api():
    paths = {operation.path for operation in OPERATIONS}
    assert {"/api/products", "/api/carts/{cart_id}/checkout", "/webhooks/{provider}"} <= paths


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
@given(case=CASES)
def test_no_api_input_causes_a_server_error(service, case):
    response = case.call(
        base_url=service.base_url, headers={"Authorization": f"Bearer {service.token}"}
    )
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text}"
    assert "Traceback" not in response.text
