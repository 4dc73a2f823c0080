"""memories/settings: the per-workspace hygiene settings (GET with the scope in the query string, PATCH)."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import API, SdkClient
from tests.memories.helpers import ACME_SCOPE

DEFAULTS = {
    "redactCredentials": True,
    "scrubAtRest": False,
    "admissionEnabled": False,
    "admissionThreshold": 0.4,
    "admissionFastPathMargin": 0.15,
    "admissionDuplicateCosine": 0.95,
    "importanceWeight": 0.15,
    "halfLifeDays": 30.0,
    "mmrLambda": 0.7,
    "sessionsEnabled": True,
    "proceduralEnabled": True,
}


def get(api: SdkClient, query: str = "") -> Any:
    return api.client.get(f"{API}/memories/settings{query}", HTTP_AUTHORIZATION=f"Bearer {api.key}")


def patch(api: SdkClient, body: Any) -> Any:
    return api.client.patch(
        f"{API}/memories/settings",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    )


def test_it_shows_the_defaults(alice_api):
    response = get(alice_api)
    assert response.status_code == 200
    assert response.json()["data"] == DEFAULTS


def test_it_changes_only_the_fields_sent(alice_api):
    response = patch(alice_api, {"admissionEnabled": True, "importanceWeight": 0.3})
    assert response.status_code == 200, response.content
    assert response.json()["data"] == {**DEFAULTS, "admissionEnabled": True, "importanceWeight": 0.3}
    patch(alice_api, {"admissionThreshold": 0.5})
    assert get(alice_api).json()["data"] == {
        **DEFAULTS,
        "admissionEnabled": True,
        "importanceWeight": 0.3,
        "admissionThreshold": 0.5,
    }


def test_it_restores_a_server_default_with_null(alice_api, settings):
    patch(alice_api, {"importanceWeight": 0.9})
    settings.MEMORY_IMPORTANCE_WEIGHT = 0.2
    patch(alice_api, {"importanceWeight": None})
    assert get(alice_api).json()["data"]["importanceWeight"] == 0.2


def test_it_explains_what_to_fix(alice_api):
    cases = [
        ({"importanceWeight": 1.5}, "INVALID_REQUEST", "importanceWeight"),
        ({"admissionThreshold": -0.1}, "INVALID_REQUEST", "admissionThreshold"),
        ({"admissionEnabled": None}, "INVALID_REQUEST", "admissionEnabled must be true or false"),
        ({"admisionEnabled": True}, "INVALID_REQUEST", "unknown field"),
        ({}, "INVALID_REQUEST", "Nothing to change"),
    ]
    for body, code, hint in cases:
        response = patch(alice_api, body)
        assert response.status_code == 400, body
        error = response.json()["error"]
        assert error["code"] == code and hint in error["message"], (body, error)


def test_it_keeps_settings_per_workspace(personas):
    patch(personas.alice_api, {"scrubAtRest": True})
    # bob works in org acme; charlie naming acme's project lands in his own workspace.
    assert get(personas.bob_api, "?projectId=github.com/acme/x").json()["data"]["scrubAtRest"] is False
    refused = patch(personas.bob_api, {"admissionEnabled": True, "scope": ACME_SCOPE})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN_ROLE"
    assert get(personas.bob_api, "?projectId=github.com/acme/x").json()["data"]["admissionEnabled"] is False
    patch(personas.alice_api, {"admissionEnabled": True, "scope": ACME_SCOPE})
    assert get(personas.alice_api, "?projectId=github.com/acme/x").json()["data"]["admissionEnabled"] is True
    assert (
        get(personas.charlie_api, "?projectId=github.com/acme/x").json()["data"]["admissionEnabled"] is False
    )
    assert get(personas.alice_api).json()["data"]["admissionEnabled"] is False


def test_it_answers_404_for_another_owners_tenant(personas, settings):
    personas.alice_api.add("alice's tenant exists", scope={"tenantId": "cust-1"})
    settings.SDK_AUTO_PROVISION_TENANTS = False
    response = get(personas.charlie_api, "?tenantId=cust-1")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "TENANT_NOT_FOUND"
    response = patch(personas.charlie_api, {"admissionEnabled": True, "scope": {"tenantId": "cust-1"}})
    assert response.status_code == 404


def test_it_needs_a_key(anonymous_api):
    assert get(anonymous_api).status_code == 401


def test_it_sets_decay_and_diversity_and_turns_them_off(alice_api, settings):
    """halfLifeDays 0 and mmrLambda 1 are "off"; null goes back to the server default, which follows
    SEARCH_HALF_LIFE_DAYS / SEARCH_MMR_LAMBDA."""
    response = patch(alice_api, {"halfLifeDays": 7, "mmrLambda": 0.5})
    assert response.status_code == 200, response.content
    assert response.json()["data"] == {**DEFAULTS, "halfLifeDays": 7.0, "mmrLambda": 0.5}
    off = patch(alice_api, {"halfLifeDays": 0, "mmrLambda": 1}).json()["data"]
    assert (off["halfLifeDays"], off["mmrLambda"]) == (0.0, 1.0)
    settings.SEARCH_HALF_LIFE_DAYS, settings.SEARCH_MMR_LAMBDA = 14.0, 0.9
    restored = patch(alice_api, {"halfLifeDays": None, "mmrLambda": None}).json()["data"]
    assert (restored["halfLifeDays"], restored["mmrLambda"]) == (14.0, 0.9)


def test_it_explains_decay_and_diversity_values_out_of_range(alice_api):
    for body, field in (
        ({"halfLifeDays": -1}, "halfLifeDays"),
        ({"halfLifeDays": 4000}, "halfLifeDays"),
        ({"mmrLambda": 1.5}, "mmrLambda"),
        ({"mmrLambda": "high"}, "mmrLambda"),
    ):
        response = patch(alice_api, body)
        assert response.status_code == 400, body
        error = response.json()["error"]
        assert error["code"] == "INVALID_REQUEST" and field in error["message"], (body, error)
