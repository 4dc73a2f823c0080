"""graph/rollout GET/POST/PATCH and graph/status as HTTP routes, and the tenant boundary: a caller only
ever reads and changes the rollout of a workspace his key resolves to."""

from __future__ import annotations

import json

import pytest

from rollout import services
from tests.conftest import API
from tests.memories.helpers import ACME_SCOPE, personal_workspace_id
from tests.rollout.helpers import record, rollout


def patch(api, body) -> object:
    return api.client.patch(
        f"{API}/graph/rollout",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    )


def test_it_starts_a_new_workspace_off(personas):
    data = rollout(personas.alice_api)
    assert data["rollout"] == {"mode": "off", "autopilotEnabled": False, "updatedAt": None, "updatedBy": None}
    assert data["retrievalPolicy"]["defaultStrategy"] == "lexical"
    state = services.rollout_state_get(workspace_id=personal_workspace_id(personas.alice))
    assert state.mode == "off" and state.default_strategy == "lexical" and not state.canary_blocked


def test_it_sets_the_mode_by_post_and_patch(personas):
    api = personas.alice_api
    data = api.ok("graph/rollout", {"mode": "shadow"})
    assert data["rollout"]["mode"] == "shadow" and data["rollout"]["updatedBy"] == f"user:{personas.alice.pk}"
    assert data["rollout"]["updatedAt"] is not None
    assert set(data) == {"rollout", "shadowMetrics", "qualityGate", "rolloutPlan", "retrievalPolicy", "scope"}
    response = patch(api, {"mode": "canary"})
    assert response.status_code == 200 and response.json()["data"]["rollout"]["mode"] == "canary"
    assert rollout(api)["rollout"]["mode"] == "canary"
    ws = personal_workspace_id(personas.alice)
    assert services.rollout_state_get(workspace_id=ws).mode == "canary"
    response = patch(api, {"autopilotEnabled": True})
    assert response.json()["data"]["rollout"] == {
        **response.json()["data"]["rollout"],
        "mode": "canary",
        "autopilotEnabled": True,
    }


def test_it_answers_the_mode_change_at_once_despite_the_cache(alice_api, ws):
    assert services.rollout_state_get(workspace_id=ws).mode == "off"  # cached now
    alice_api.ok("graph/rollout", {"mode": "shadow"})
    assert services.rollout_state_get(workspace_id=ws).mode == "shadow"


@pytest.mark.parametrize(
    "body",
    [
        {"mode": "on"},
        {"mode": None},
        {},
        {"mode": "canary", "surprise": 1},
        {"mode": "shadow", "autopilotEnabled": True},
    ],
)
def test_it_rejects_an_invalid_post(alice_api, body):
    alice_api.error("graph/rollout", body, status=400, code="INVALID_REQUEST")


@pytest.mark.parametrize("body", [{"mode": "on"}, {}, {"autopilotEnabled": "maybe"}, {"scope": {}}])
def test_it_rejects_an_invalid_patch(alice_api, body):
    response = patch(alice_api, body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_REQUEST"


def test_it_refuses_canary_while_the_gate_blocks(alice_api, ws):
    alice_api.ok("graph/rollout", {"mode": "shadow"})
    record(ws, 16)
    record(ws, 4, reason="graph_expansion_error")
    error = alice_api.error("graph/rollout", {"mode": "canary"}, status=409, code="CANARY_ROLLOUT_BLOCKED")
    assert error["type"] == "validation_error"
    assert error["details"] == {
        "reasonCodes": ["FALLBACK_RATE_ABOVE_LIMIT", "GRAPH_ERROR_RATE_ABOVE_LIMIT"],
        "qualityStatus": "fail",
        "windowHours": 24,
    }
    response = patch(alice_api, {"mode": "canary", "autopilotEnabled": True})
    assert response.status_code == 409 and response.json()["error"]["code"] == "CANARY_ROLLOUT_BLOCKED"
    data = rollout(alice_api)
    assert data["rollout"]["mode"] == "shadow" and data["rollout"]["autopilotEnabled"] is False
    # Moving away from canary is always allowed.
    assert alice_api.ok("graph/rollout", {"mode": "off"})["rollout"]["mode"] == "off"


def test_it_parses_the_get_query(alice_api):
    data = rollout(alice_api, "?windowHours=48&userId=u1&projectId=github.com/alice/site")
    assert data["scope"] == {"tenantId": None, "userId": "u1", "projectId": "github.com/alice/site"}
    assert data["qualityGate"]["windowHours"] == 48 and data["shadowMetrics"]["windowHours"] == 48


@pytest.mark.parametrize(
    "query", ["?windowHours=0", "?windowHours=169", "?windowHours=abc", "?tenantId=" + "t" * 121]
)
def test_it_rejects_a_bad_get_query(alice_api, query):
    response = alice_api.get(f"graph/rollout{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_REQUEST"


def test_it_requires_a_key(anonymous_api):
    anonymous_api.error("graph/rollout", {"mode": "shadow"}, status=401, code="MISSING_API_KEY")
    assert anonymous_api.get("graph/rollout").status_code == 401
    assert patch(anonymous_api, {"mode": "shadow"}).status_code == 401


def test_it_answers_status_by_get_with_the_rollout(alice_api):
    response = alice_api.get("graph/status?topNodesLimit=2")
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["rollout"]["mode"] == "off" and data["rolloutPlan"]["autopilot"]["applied"] is False
    assert data["qualityGate"]["status"] == "insufficient_data"


def test_it_keeps_rollout_inside_the_workspace(personas):
    alice, charlie = personas.alice_api, personas.charlie_api
    alice_ws = personal_workspace_id(personas.alice)
    alice.ok("graph/rollout", {"mode": "canary"})
    record(alice_ws, 16)
    record(alice_ws, 4, reason="graph_expansion_error")

    # charlie sees his own workspace: default mode, no metrics, no alarms.
    mine = rollout(charlie)
    assert mine["rollout"]["mode"] == "off" and mine["shadowMetrics"]["totalRequests"] == 0
    assert charlie.ok("graph/status", {})["alarms"] == []
    # Naming alice's project or an org he is not in routes him to his own workspace, never to alice's.
    for scope in ({"projectId": "github.com/alice/site"}, ACME_SCOPE, {"tenantId": "alice"}):
        data = charlie.ok("graph/rollout", {"mode": "shadow", "scope": scope})
        assert data["rollout"]["mode"] == "shadow" and data["shadowMetrics"]["totalRequests"] == 0
        assert data["rollout"]["updatedBy"] == f"user:{personas.charlie.pk}"
    query = "?projectId=github.com/acme/x&tenantId=acme"
    assert rollout(charlie, query)["shadowMetrics"]["totalRequests"] == 0

    # alice's personal workspace and org are untouched.
    data = rollout(alice)
    assert data["rollout"]["mode"] == "canary" and data["rollout"]["updatedBy"] == f"user:{personas.alice.pk}"
    assert data["shadowMetrics"]["totalRequests"] == 20
    assert alice.ok("graph/status", {"scope": ACME_SCOPE})["rollout"]["mode"] == "off"
    assert services.rollout_state_get(workspace_id=alice_ws).mode == "canary"
    assert services.rollout_state_get(workspace_id=personas.acme.id).mode == "off"
