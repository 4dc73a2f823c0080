"""schemathesis against the served OpenAPI document, through the real WSGI app, with a valid key.

Every operation gets FUZZ_EXAMPLES generated requests (a fast profile in the suite; `make fuzz` runs 1000 per
operation): no 5xx, every answer as documented, never a traceback in a body.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from config.wsgi import application
from tests.conftest import make_key, make_user

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "8"))
CHECKS = (not_a_server_error, response_schema_conformance)
schemathesis.experimental.OPEN_API_3_1.enable()  # django-ninja serves OpenAPI 3.1


@schemathesis.serializer("application/x-ndjson")
class NdjsonSerializer:
    """workspace/import takes an export file as its body; the fuzzer sends arbitrary text as one."""

    def _body(self, value: object) -> dict[str, bytes]:
        return {"data": value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass")}

    def as_requests(self, context: object, value: object) -> dict[str, bytes]:
        return self._body(value)

    def as_werkzeug(self, context: object, value: object) -> dict[str, bytes]:
        return self._body(value)


@pytest.fixture
def api_schema():
    return schemathesis.from_wsgi("/api/sdk/v1/openapi.json", application)


schema = schemathesis.from_pytest_fixture("api_schema")


@pytest.fixture(autouse=True)
def keep_test_connections():
    # Django's test Client does the same: a real WSGI call would close the connection holding the test's
    # transaction at the end of every request.
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def fuzz_key(settings) -> str:
    settings.RATE_LIMIT_REQUESTS = 1_000_000  # the fuzzer is one client sending thousands of requests
    return make_key(make_user("fuzzer"))


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("FUZZ_RANDOM"),
    suppress_health_check=list(HealthCheck),
)
def test_it_survives_fuzzing(case, fuzz_key):
    response = case.call_wsgi(headers={"Authorization": f"Bearer {fuzz_key}"})
    case.validate_response(response, checks=CHECKS)
    assert b"Traceback" not in response.data
