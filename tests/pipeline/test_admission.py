"""Admission control (A-MAC, off by default): a near-duplicate is not written; memories/add answers with the
existing memory, admitted false, the reason and the score; graph/status counts the decisions."""

from __future__ import annotations

import json

import pytest

from memories.hygiene import admission_score, factual_confidence
from pipeline.services import jobs_run_pending
from tests.conftest import API
from tests.memories.helpers import ACME_SCOPE, personal_workspace_id, stored_count


def turn_on(api, **extra) -> None:
    response = api.client.patch(
        f"{API}/memories/settings",
        data=json.dumps({"admissionEnabled": True, **extra}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    )
    assert response.status_code == 200, response.content


def test_it_scores_a_confident_user_message_by_its_novelty():
    # A confident user message: heuristic = 0.15 + 0.15 + 0.30·n + 0.10 + 0.105 = 0.505 + 0.30·n.
    for cosine in (0.0, 0.5, 0.85, 1.0):
        score = admission_score(
            content="We ship on Mondays", memory_type="note", role="user", max_cosine=cosine
        )
        assert score.composite == pytest.approx(0.505 + 0.30 * (1 - cosine), abs=1e-3)
    assert (
        admission_score(content="x", memory_type="note", role=None, max_cosine=None).factors[
            "semantic_novelty"
        ]
        == 1
    )


def test_it_lowers_confidence_for_hedging():
    assert factual_confidence("The API is down") == 1.0
    assert factual_confidence("I think the API might be down, not sure") == pytest.approx(0.7)
    assert (
        factual_confidence(
            " ".join(
                [
                    "maybe might perhaps probably possibly could be uncertain i believe",
                    "not certain not confident",
                ]
            )
        )
        == 0.2
    )


def test_it_is_off_by_default(alice_api, personas):
    first = alice_api.post("memories/add", {"content": "We deploy with blue-green on Fridays"})
    second = alice_api.post("memories/add", {"content": "We deploy with blue-green on Fridays"})
    assert first.status_code == second.status_code == 201
    assert second.json()["data"]["admitted"] is True and second.json()["data"]["admission"] is None
    assert stored_count(personal_workspace_id(personas.alice)) == 2


def test_it_refuses_an_exact_repeat_before_it_is_even_embedded(alice_api, personas):
    turn_on(alice_api)
    first = alice_api.add("We deploy with blue-green on Fridays")
    response = alice_api.post("memories/add", {"content": "We deploy with blue-green on Fridays"})
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["admitted"] is False
    assert data["id"] == first["id"] and data["memory"]["id"] == first["id"]
    assert data["admission"]["reason"] == "NEAR_DUPLICATE"
    assert data["admission"]["similarity"] == 1.0
    assert 0 < data["admission"]["score"] < 1
    assert "NEAR_DUPLICATE" in data["message"]
    assert stored_count(personal_workspace_id(personas.alice)) == 1


def test_it_refuses_a_paraphrase_and_admits_something_new(personas, local_embedder):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    turn_on(api)
    first = api.add("We deploy with blue-green on Fridays.")
    jobs_run_pending(workspace_id=workspace_id)

    near = api.post("memories/add", {"content": "we deploy with blue green on fridays"})
    assert near.status_code == 200, near.content
    assert near.json()["data"]["admission"]["reason"] == "NEAR_DUPLICATE"
    assert near.json()["data"]["id"] == first["id"]
    assert near.json()["data"]["admission"]["similarity"] >= 0.95

    novel = api.post("memories/add", {"content": "The on-call rotation changes every Monday at 09:00"})
    assert novel.status_code == 201
    decision = novel.json()["data"]["admission"]
    assert decision["admitted"] is True and decision["reason"] == "FAST_PATH"
    assert decision["nearestMemoryId"] == first["id"] and decision["similarity"] < 0.85
    assert stored_count(workspace_id) == 2

    status = api.ok("graph/status", {})["admission"]
    # The first memory went through admission too.
    assert status == {
        "enabled": True,
        "admitted": 2,
        "rejected": 1,
        "byReason": {"FAST_PATH": 2, "NEAR_DUPLICATE": 1},
    }


def test_it_compares_only_with_memories_the_writer_can_read(personas):
    turn_on(personas.alice_api)
    personas.alice_api.add("Shared: the VPN config lives in 1Password", scope={"userId": "u1"})
    # Another end user's memory is not a duplicate of this one.
    again = personas.alice_api.post(
        "memories/add", {"content": "Shared: the VPN config lives in 1Password", "scope": {"userId": "u2"}}
    )
    assert again.status_code == 201 and again.json()["data"]["admitted"] is True


def test_it_never_answers_with_another_workspaces_memory(personas):
    text = "acme: payroll runs on the 25th"
    services_memory = personas.bob_api.add(text, scope=ACME_SCOPE)
    turn_on(personas.charlie_api, scope=ACME_SCOPE)
    response = personas.charlie_api.post("memories/add", {"content": text, "scope": ACME_SCOPE})
    assert response.status_code == 201
    assert response.json()["data"]["id"] != services_memory["id"]
    # And an admission decision of bob's org does not show in charlie's status.
    assert personas.charlie_api.ok("graph/status", {"scope": ACME_SCOPE})["admission"]["admitted"] == 1
    assert personas.bob_api.ok("graph/status", {"scope": ACME_SCOPE})["admission"]["enabled"] is False


def test_it_replays_a_refusal_under_the_same_idempotency_key(alice_api):
    turn_on(alice_api)
    first = alice_api.add("Backups are kept for 35 days")
    headers = {"Idempotency-Key": "k-1"}
    one = alice_api.post("memories/add", {"content": "Backups are kept for 35 days"}, headers=headers)
    two = alice_api.post("memories/add", {"content": "Backups are kept for 35 days"}, headers=headers)
    assert one.status_code == two.status_code == 200
    assert two["Idempotent-Replayed"] == "true"
    assert one.json()["data"]["id"] == two.json()["data"]["id"] == first["id"]


def test_it_asks_the_model_for_future_utility_below_the_fast_path(personas, settings):
    from tests.helpers.fake_openai import FakeProvider

    provider = FakeProvider(chat_answer=lambda body: json.dumps({"score": 0.0}))
    settings.GRAPH_LLM_MODEL = "openai/cairn-test-model"
    settings.GRAPH_LLM_API_BASE = provider.start()
    settings.GRAPH_LLM_API_KEY = "test-key"
    settings.GRAPH_LLM_MAX_RETRIES = 0
    # A high threshold puts an ordinary memory below the fast path, so the model's rating decides.
    settings.MEMORY_ADMISSION_DUPLICATE_COSINE = 1.01
    try:
        api = personas.alice_api
        turn_on(api, admissionThreshold=0.9)
        first = api.add("maybe the cache is probably stale, not sure")
        response = api.post("memories/add", {"content": "maybe the cache is probably stale, not sure"})
        assert response.status_code == 200
        decision = response.json()["data"]["admission"]
        assert decision["reason"] == "LOW_SCORE" and decision["factors"]["future_utility"] == 0.0
        assert response.json()["data"]["id"] == first["id"]
        chats = [r for r in provider.requests if r["path"].endswith("/chat/completions")]
        assert chats and "future conversations" in chats[0]["body"]["messages"][0]["content"]
    finally:
        provider.stop()


def test_it_applies_to_the_mcp_add_tool_too(alice_api, personas):
    from mcp_server.server import add_memory_sync, caller_for_key

    turn_on(alice_api)
    caller = caller_for_key(alice_api.key)
    first = add_memory_sync(caller=caller, payload={"content": "Releases are cut on Tuesdays"}, role="write")
    again = add_memory_sync(caller=caller, payload={"content": "Releases are cut on Tuesdays"}, role="write")
    assert first["admitted"] is True
    assert again["admitted"] is False and again["id"] == first["id"]
    assert again["admission"]["reason"] == "NEAR_DUPLICATE"
    assert stored_count(personal_workspace_id(personas.alice)) == 1
