"""Property-based requests against the OpenAPI schema, in process (schemathesis, no network): no route
answers a generated request with a server error or a body that breaks its documented content type.
The language model is a zero-delay stand-in (a unit-test fake), so /ask and /ask/stream run fully."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is in the dev extra")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.specs.openapi.checks import content_type_conformance  # noqa: E402

from crossmodalrag.api.app import create_app  # noqa: E402
from tests.api.helpers import SlowLLM, server_settings  # noqa: E402

ANSWER = "The parser moved from regexes to a tokenizer [E1]."


@pytest.fixture(scope="module")
def api_schema(sample_db):
    # schemathesis talks to the app as Starlette's test client does, with `Host: testserver`
    app = create_app(
        server_settings(sample_db), allow_hosts=frozenset({"testserver"}), llm_loader=lambda _: SlowLLM(ANSWER)
    )
    return schemathesis.openapi.from_asgi("/openapi.json", app)


@schemathesis.check
def no_undocumented_server_error(ctx, response, case) -> bool | None:
    """5xx only where the operation documents it (501: the memory hierarchy is not built yet)."""
    documented = case.operation.definition.raw.get("responses", {})
    if response.status_code >= 500 and str(response.status_code) not in documented:
        raise AssertionError(f"{case.method} {case.path}: undocumented {response.status_code}: {response.text[:200]}")
    return None


def test_every_route_survives_generated_requests(api_schema) -> None:
    operations = list(api_schema.get_all_operations())
    assert len(operations) >= 17
    for result in operations:
        operation = result.ok()

        @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=operation.as_strategy())
        def check(case) -> None:
            case.call_and_validate(checks=[no_undocumented_server_error, content_type_conformance])

        check()
