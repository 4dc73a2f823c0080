"""Every response under /api is the envelope with meta and X-Request-Id, whatever failed and whatever
DEBUG says."""

from __future__ import annotations

import pytest

from memories import selectors


def assert_envelope(response, *, status: int, code: str | None = None) -> dict:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"ok", "data", "error", "meta"}
    assert set(body["meta"]) == {"version", "endpoint", "requestId", "timestamp"}
    assert response["X-Request-Id"] == body["meta"]["requestId"]
    if code is not None:
        assert body["ok"] is False and body["data"] is None
        assert body["error"]["code"] == code and body["error"]["status"] == status
    return body


def test_it_answers_health_without_auth(anonymous_api):
    body = assert_envelope(anonymous_api.get("health"), status=200)
    assert body["ok"] is True
    assert body["data"]["status"] == "ok"
    assert body["meta"]["endpoint"] == "/api/sdk/v1/health"


def test_it_wraps_unknown_paths(anonymous_api):
    body = assert_envelope(anonymous_api.get("no/such/thing"), status=404, code="NOT_FOUND")
    assert body["error"]["type"] == "not_found_error"


def test_it_wraps_wrong_methods(alice_api):
    body = assert_envelope(alice_api.get("memories/add"), status=405, code="METHOD_NOT_ALLOWED")
    assert body["error"]["details"]["allowed"] == ["POST"]


def test_it_refuses_bodies_over_one_megabyte(alice_api):
    response = alice_api.post("memories/add", {"content": "x" * (1_100_000)})
    body = assert_envelope(response, status=413, code="PAYLOAD_TOO_LARGE")
    assert body["error"]["details"]["maxBytes"] == 1_048_576


def test_it_reports_bad_json_in_the_envelope(alice_api):
    assert_envelope(alice_api.post("memories/add", "{not json"), status=400, code="INVALID_REQUEST")


@pytest.mark.parametrize("debug", [False, True])
def test_it_hides_tracebacks_on_500(alice_api, monkeypatch, settings, debug):
    settings.DEBUG = debug

    def explode(**kwargs):
        raise RuntimeError("database exploded with secret details")

    monkeypatch.setattr(selectors, "memory_list", explode)
    response = alice_api.post("memories/list", {})
    body = assert_envelope(response, status=500, code="INTERNAL_ERROR")
    assert body["error"]["retryable"] is True
    assert b"secret details" not in response.content
    assert b"Traceback" not in response.content


def test_it_keeps_a_sane_client_request_id(alice_api):
    response = alice_api.post("memories/list", {}, headers={"X-Request-Id": "client-req-12345"})
    assert response["X-Request-Id"] == "client-req-12345"
    assert response.json()["meta"]["requestId"] == "client-req-12345"


def test_it_replaces_an_unsafe_client_request_id(alice_api):
    response = alice_api.post("memories/list", {}, headers={"X-Request-Id": "bad id with spaces"})
    assert response["X-Request-Id"] != "bad id with spaces"


def test_it_answers_cors_preflight(anonymous_api):
    response = anonymous_api.client.options("/api/sdk/v1/memories/add")
    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == "*"
    assert "Authorization" in response["Access-Control-Allow-Headers"]


def test_it_reports_server_time(alice_api):
    response = alice_api.post("memories/list", {})
    assert response["Server-Timing"].startswith("app;dur=")
