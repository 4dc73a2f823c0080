"""The quality gate, shadowMetrics and alarms as graph/status and graph/rollout show them, plus the gate's
exclusion of self-inflicted fallbacks."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from rollout import services
from tests.rollout.helpers import codes, record, rollout


def status(api) -> dict:
    return api.ok("graph/status", {})


def test_it_reports_insufficient_data_without_metrics(alice_api):
    data = status(alice_api)
    gate = data["qualityGate"]
    assert gate["status"] == "insufficient_data" and gate["canaryBlocked"] is False and gate["reasons"] == []
    assert gate["windowHours"] == 24 and gate["minHybridSamples"] == 20
    assert data["shadowMetrics"]["totalRequests"] == 0 and data["shadowMetrics"]["fallbackRate"] == 0
    assert data["alarms"] == []
    assert data["rollout"]["mode"] == "off"
    # The status fields that were there before the rollout still are.
    assert {
        "health",
        "counts",
        "topConnectedNodes",
        "pipeline",
        "vectors",
        "recentErrors",
        "sampledAt",
    } <= set(data)


def test_it_fails_the_gate_and_raises_alarms_on_graph_errors(alice_api, ws):
    alice_api.ok("graph/rollout", {"mode": "canary"})
    record(ws, 16)
    record(ws, 4, reason="graph_expansion_error")
    data = status(alice_api)
    assert data["rollout"]["mode"] == "canary"
    shadow = data["shadowMetrics"]
    assert shadow["totalRequests"] == 20 and shadow["fallbackRate"] == 0.2
    assert shadow["graphErrorFallbacks"] == 4 and shadow["lastFallbackReason"] == "graph_expansion_error"
    gate = data["qualityGate"]
    assert gate["status"] == "fail" and gate["canaryBlocked"] is True
    assert gate["current"]["fallbackRate"] == 0.2 and gate["current"]["graphErrorFallbackRate"] == 0.2
    assert codes(gate["reasons"]) == {"FALLBACK_RATE_ABOVE_LIMIT", "GRAPH_ERROR_RATE_ABOVE_LIMIT"}
    assert all(r["severity"] == "critical" and r["blocking"] for r in gate["reasons"])
    alarms = {alarm["code"]: alarm["severity"] for alarm in data["alarms"]}
    assert alarms == {
        "HIGH_FALLBACK_RATE": "critical",
        "GRAPH_EXPANSION_ERRORS": "critical",
        "CANARY_QUALITY_GATE_BLOCKED": "critical",
    }
    from_alarms = [error for error in data["recentErrors"] if error["source"] == "alarm"]
    assert codes(from_alarms) == set(alarms)
    state = services.rollout_state_get(workspace_id=ws)
    assert state.canary_blocked and state.gate_status == "fail"
    assert "FALLBACK_RATE_ABOVE_LIMIT" in state.gate_reason_codes


def test_it_does_not_let_a_block_sustain_itself(alice_api, ws):
    # Yesterday's errors blocked canary; since then every hybrid request was blocked by the gate.
    record(ws, 16, at=timezone.now() - timedelta(hours=30))
    record(ws, 4, reason="graph_expansion_error", at=timezone.now() - timedelta(hours=30))
    record(ws, 40, reason="quality_gate_blocked", shadow=True)
    gate = status(alice_api)["qualityGate"]
    assert gate["current"]["gateBlockedFallbacks"] == 40
    assert gate["current"]["hybridRequested"] == 0 and gate["current"]["fallbackRate"] == 0
    # Blocked requests are no evidence either way: the gate is back to insufficient data, canary allowed.
    assert gate["status"] == "insufficient_data" and gate["canaryBlocked"] is False


def test_it_does_not_count_gate_blocked_fallbacks_in_the_fallback_rate(alice_api, ws):
    record(ws, 20)
    record(ws, 30, reason="quality_gate_blocked", shadow=True)
    data = status(alice_api)
    current = data["qualityGate"]["current"]
    assert (
        current["hybridRequested"] == 20 and current["hybridFallbacks"] == 0 and current["fallbackRate"] == 0
    )
    assert current["gateBlockedFallbacks"] == 30
    assert data["qualityGate"]["status"] == "pass"
    shadow = data["shadowMetrics"]
    assert (
        shadow["hybridRequested"] == 50
        and shadow["fallbackCount"] == 0
        and shadow["gateBlockedFallbacks"] == 30
    )
    assert shadow["lastFallbackReason"] == "quality_gate_blocked"
    assert "HIGH_FALLBACK_RATE" not in codes(data["alarms"])


def test_it_does_not_count_the_modes_own_fallbacks(alice_api, ws):
    # Off and shadow make every hybrid request fall back; that must not keep a workspace out of canary.
    record(ws, 25, mode="off", reason="rollout_off")
    record(ws, 25, mode="shadow", reason="shadow_mode", shadow=True)
    data = status(alice_api)
    assert data["qualityGate"]["status"] == "insufficient_data"
    assert data["qualityGate"]["current"]["modeFallbacks"] == 50
    assert data["shadowMetrics"]["modeFallbacks"] == 50 and data["shadowMetrics"]["fallbackRate"] == 0
    assert alice_api.ok("graph/rollout", {"mode": "canary"})["rollout"]["mode"] == "canary"


def test_it_flags_a_fallback_rate_regression(alice_api, ws):
    record(ws, 20, at=timezone.now() - timedelta(hours=30))
    record(ws, 18)
    record(ws, 2, reason="rollout_guardrail")
    gate = status(alice_api)["qualityGate"]
    assert gate["previous"]["hybridRequested"] == 20 and gate["previous"]["fallbackRate"] == 0
    assert gate["current"]["fallbackRate"] == 0.1
    assert codes(gate["reasons"]) == {"FALLBACK_RATE_REGRESSION"}  # 10 % is under the 15 % limit itself
    assert gate["status"] == "fail"


def test_it_flags_low_expansion_coverage_as_a_blocking_warning(alice_api, ws):
    record(ws, 20, expanded=0)
    gate = status(alice_api)["qualityGate"]
    assert gate["current"]["canaryApplied"] == 20 and gate["current"]["expansionCoverageRate"] == 0
    (reason,) = gate["reasons"]
    assert reason["code"] == "EXPANSION_COVERAGE_TOO_LOW"
    assert reason["severity"] == "warning" and reason["blocking"] is True
    assert gate["status"] == "fail"


def test_it_flags_a_candidate_lift_regression(alice_api, ws):
    record(ws, 12, expanded=3, at=timezone.now() - timedelta(hours=30))
    record(ws, 20, expanded=1)
    gate = status(alice_api)["qualityGate"]
    assert gate["previous"]["avgCandidateLift"] == 3 and gate["current"]["avgCandidateLift"] == 1
    assert codes(gate["reasons"]) == {"CANDIDATE_LIFT_REGRESSION"}
    assert gate["reasons"][0]["threshold"] == 1.95


def test_it_raises_an_elevated_fallback_alarm_on_fewer_requests(alice_api, ws):
    record(ws, 9)
    record(ws, 1, reason="rollout_guardrail")
    data = status(alice_api)
    assert data["shadowMetrics"]["fallbackRate"] == 0.1
    assert [(a["code"], a["severity"]) for a in data["alarms"]] == [("ELEVATED_FALLBACK_RATE", "warning")]


def test_it_uses_the_requested_window(alice_api, ws):
    record(ws, 5, at=timezone.now() - timedelta(minutes=90))
    one_hour = rollout(alice_api, "?windowHours=1")
    assert one_hour["shadowMetrics"]["windowHours"] == 1 and one_hour["shadowMetrics"]["totalRequests"] == 0
    assert one_hour["qualityGate"]["windowHours"] == 1
    assert one_hour["qualityGate"]["previous"]["totalRequests"] == 5
    assert rollout(alice_api)["shadowMetrics"]["totalRequests"] == 5


def test_it_ignores_metrics_older_than_two_windows(alice_api, ws):
    record(ws, 20, reason="graph_expansion_error", at=timezone.now() - timedelta(hours=49))
    gate = status(alice_api)["qualityGate"]
    assert gate["current"]["totalRequests"] == 0 and gate["previous"]["totalRequests"] == 0
