"""The rollout plan and both autopilots: the default strategy is promoted after ready *windows*, not
requests, and rolled back at once."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from rollout import services
from rollout.models import RetrievalPolicy
from tenancy.rls import workspace_context
from tests.rollout.helpers import record, rollout


def policy(ws: int) -> RetrievalPolicy:
    with workspace_context(ws):
        return RetrievalPolicy.objects.get(workspace_id=ws)


def rollout_mode(api) -> str:
    return api.ok("graph/status", {})["rollout"]["mode"]


def evaluate(ws: int) -> None:
    with workspace_context(ws):
        services.retrieval_policy_evaluate(workspace_id=ws)


def test_it_holds_lexical_when_samples_are_insufficient(alice_api, ws):
    alice_api.ok("graph/rollout", {"mode": "shadow"})
    # 10 requests, 5 of them hybrid, all traversed in shadow, 0.4 graph candidates on average.
    record(ws, 5, mode="shadow", reason="shadow_mode", shadow=True, graph=0)
    record(ws, 3, mode="shadow", requested="lexical", shadow=True, graph=0)
    record(ws, 2, mode="shadow", requested="lexical", shadow=True, graph=2)
    plan = rollout(alice_api)["rolloutPlan"]
    assert plan["defaultBehaviorDecision"] == "hold_lexical_default" and plan["readyForDefaultOn"] is False
    assert "MIN_HYBRID_SAMPLES_NOT_MET" in plan["blockerCodes"]
    assert "QUALITY_STATUS_INSUFFICIENT_DATA" in plan["blockerCodes"]
    stages = {stage["stage"]: stage for stage in plan["stages"]}
    assert stages["canary"]["ready"] is False
    assert set(stages["canary"]["blockerCodes"]) == {
        "MIN_SHADOW_EXECUTIONS_NOT_MET",
        "SHADOW_GRAPH_CANDIDATES_TOO_LOW",
    }
    assert stages["canary"]["currentSamples"] == 10 and stages["canary"]["requiredSamples"] == 40
    assert plan["recommendedMode"] == "shadow" and plan["currentMode"] == "shadow"
    baseline = {metric["metric"]: metric for metric in plan["baseline"]}
    assert list(baseline) == [
        "shadow_executions",
        "shadow_avg_graph_candidates",
        "shadow_graph_error_rate",
        "hybrid_samples",
        "canary_samples",
        "fallback_rate",
        "graph_error_rate",
        "expansion_coverage",
    ]
    assert baseline["shadow_avg_graph_candidates"]["current"] == 0.4
    assert (
        baseline["shadow_executions"]["gapToGoal"] == 30 and baseline["shadow_executions"]["ready"] is False
    )
    assert plan["slo"]["minShadowExecutionsForCanary"] == 40
    assert plan["autopilot"] == {"enabled": False, "applied": False}


def test_it_recommends_but_does_not_move_without_the_mode_autopilot(alice_api):
    data = rollout(alice_api)
    assert data["rollout"]["mode"] == "off" and data["rolloutPlan"]["recommendedMode"] == "shadow"
    assert data["rolloutPlan"]["autopilot"] == {"enabled": False, "applied": False}


def test_it_moves_off_to_shadow_with_the_mode_autopilot(alice_api):
    patch_autopilot(alice_api)
    assert rollout_mode(alice_api) == "off"  # enabling it changes nothing by itself
    data = rollout(alice_api)
    assert data["rollout"]["mode"] == "shadow" and data["rollout"]["updatedBy"] == "autopilot"
    assert data["rolloutPlan"]["autopilot"] == {"enabled": True, "applied": True}
    # Shadow → canary needs shadow evidence first.
    again = rollout(alice_api)
    assert again["rollout"]["mode"] == "shadow" and again["rolloutPlan"]["autopilot"]["applied"] is False


def test_it_moves_shadow_to_canary_once_shadow_evidence_suffices(alice_api, ws):
    alice_api.ok("graph/rollout", {"mode": "shadow"})
    patch_autopilot(alice_api)
    record(ws, 40, mode="shadow", reason="shadow_mode", shadow=True, graph=2)
    data = rollout(alice_api)
    assert data["rollout"]["mode"] == "canary" and data["rolloutPlan"]["autopilot"]["applied"] is True


def test_it_promotes_after_two_ready_windows_not_two_requests(alice_api, ws, clock):
    alice_api.ok("graph/rollout", {"mode": "canary"})
    record(ws, 24)  # good canary traffic: applied, one memory added each time
    clock.advance(minutes=1)
    for _ in range(3):  # many requests in one window count once
        evaluate(ws)
    services.rollout_cache_clear()  # as another process would: no in-process memory of the window
    evaluate(ws)
    first = policy(ws)
    assert first.ready_window_streak == 1 and first.default_strategy == "lexical"
    assert first.last_decision == "hold_lexical_default"
    assert services.rollout_state_get(workspace_id=ws).default_strategy == "lexical"

    clock.advance(minutes=60)
    evaluate(ws)
    second = policy(ws)
    assert second.ready_window_streak == 2 and second.default_strategy == "hybrid"
    assert second.last_decision == "promote_hybrid_default" and second.updated_by == "autopilot"
    state = services.rollout_state_get(workspace_id=ws)
    assert state.default_strategy == "hybrid" and state.ready_for_default_on and state.blocker_codes == []
    retrieval_policy = rollout(alice_api)["retrievalPolicy"]
    assert retrieval_policy["defaultStrategy"] == "hybrid" and retrieval_policy["readyWindowStreak"] == 2


def test_it_rolls_back_at_once_within_the_window(alice_api, ws, clock, settings):
    alice_api.ok("graph/rollout", {"mode": "canary"})
    record(ws, 24)
    clock.advance(minutes=1)
    evaluate(ws)
    clock.advance(minutes=60)
    evaluate(ws)
    assert policy(ws).default_strategy == "hybrid"

    record(ws, 20, reason="graph_expansion_error")
    settings.ROLLOUT_STATE_CACHE_SECONDS = 0  # the state TTL has passed
    clock.advance(
        minutes=1
    )  # same window: no new streak step, but the rollback does not wait for the next one
    evaluate(ws)
    rolled_back = policy(ws)
    assert rolled_back.default_strategy == "lexical" and rolled_back.ready_window_streak == 0
    assert rolled_back.last_decision == "rollback_lexical_default"
    state = services.rollout_state_get(workspace_id=ws)
    assert state.default_strategy == "lexical" and "FALLBACK_RATE_ABOVE_LIMIT" in state.blocker_codes


def test_it_does_not_roll_back_on_gate_blocked_fallbacks(alice_api, ws, clock):
    """A block is no evidence against the graph: 20 quality_gate_blocked fallbacks roll nothing back."""
    alice_api.ok("graph/rollout", {"mode": "canary"})
    record(ws, 24)
    clock.advance(minutes=1)
    evaluate(ws)
    clock.advance(minutes=60)
    evaluate(ws)
    record(ws, 20, reason="quality_gate_blocked", shadow=True)
    clock.advance(minutes=60)
    evaluate(ws)
    assert policy(ws).default_strategy == "hybrid" and policy(ws).last_decision == "keep_hybrid_default"


def test_it_keeps_only_the_streak_when_the_default_autopilot_is_off(alice_api, ws, clock):
    alice_api.ok("graph/rollout", {"mode": "canary"})
    record(ws, 24)
    with workspace_context(ws):
        RetrievalPolicy.objects.create(workspace_id=ws, default_autopilot_enabled=False)
    clock.advance(minutes=1)
    evaluate(ws)
    clock.advance(minutes=60)
    evaluate(ws)
    kept = policy(ws)
    assert kept.ready_window_streak == 2 and kept.default_strategy == "lexical"
    assert kept.last_decision == "promote_hybrid_default"


def test_it_resets_the_streak_on_a_window_that_is_not_ready(alice_api, ws, clock):
    alice_api.ok("graph/rollout", {"mode": "canary"})
    record(ws, 24)
    clock.advance(minutes=1)
    evaluate(ws)
    record(ws, 10, reason="graph_expansion_error")
    clock.advance(minutes=60)
    evaluate(ws)
    assert policy(ws).ready_window_streak == 0 and policy(ws).default_strategy == "lexical"


def test_it_checks_the_window_without_queries_inside_it(alice_api, ws, clock):
    evaluate(ws)
    assert policy(ws).last_evaluated_at == clock.now
    with workspace_context(ws), CaptureQueriesContext(connections["app"]) as queries:
        services.retrieval_policy_evaluate(workspace_id=ws)
    assert queries.captured_queries == []


@pytest.mark.parametrize("mode", ["off", "shadow"])
def test_it_runs_the_policy_from_get_rollout(alice_api, mode):
    alice_api.ok("graph/rollout", {"mode": mode})
    data = rollout(alice_api)["retrievalPolicy"]
    assert data["defaultStrategy"] == "lexical" and data["readyWindowStreak"] == 0
    assert data["lastDecision"] == "hold_lexical_default" and data["lastEvaluatedAt"] is not None
    assert data["autopilotEnabled"] is True


def test_it_runs_the_mode_autopilot_from_retrievals(alice_api, ws):
    patch_autopilot(alice_api)
    evaluate(ws)  # what context/get does after each retrieval
    assert services.rollout_state_get(workspace_id=ws).mode == "shadow"


def test_it_does_not_autopilot_into_a_canary_the_gate_refuses(alice_api, ws):
    alice_api.ok("graph/rollout", {"mode": "canary"})
    record(ws, 16)
    record(ws, 4, reason="rollout_guardrail")  # canary fell back too often: the gate fails
    alice_api.ok("graph/rollout", {"mode": "shadow"})
    patch_autopilot(alice_api)
    record(ws, 40, mode="shadow", reason="shadow_mode", shadow=True, graph=2)
    data = rollout(alice_api)
    stages = {stage["stage"]: stage for stage in data["rolloutPlan"]["stages"]}
    assert stages["canary"]["blockerCodes"] == ["CANARY_QUALITY_GATE_BLOCKED"]
    assert data["rollout"]["mode"] == "shadow" and data["rolloutPlan"]["recommendedMode"] == "shadow"


def patch_autopilot(api) -> None:
    response = api.client.patch(
        "/api/sdk/v1/graph/rollout",
        data={"autopilotEnabled": True},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    )
    assert response.status_code == 200, response.content
