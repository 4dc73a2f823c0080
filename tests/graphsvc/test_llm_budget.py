"""The daily LLM token budget: a workspace may lower it but not raise it above the operator's ceiling, and it
is spent atomically, so many parallel calls never overspend it by more than one call's tokens."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections

from graphsvc import llm
from graphsvc.models import LlmUsage
from tenancy.rls import workspace_context
from tests.graphsvc.conftest import FakeLlm

BUDGET = 400


def test_it_refuses_a_budget_above_the_ceiling(alice_api, settings):
    settings.GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX = 1000

    def patch(body: dict[str, Any]) -> Any:
        return alice_api.client.patch(
            "/api/sdk/v1/graph/extraction",
            data=body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {alice_api.key}",
        )

    refused = patch({"dailyTokenBudget": 10_000})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "TOKEN_BUDGET_ABOVE_CEILING"
    assert "1,000" in refused.json()["error"]["message"]
    assert patch({"dailyTokenBudget": 500}).json()["data"]["dailyTokenBudget"] == 500
    assert patch({"dailyTokenBudget": None}).json()["data"]["dailyTokenBudget"] == 1000


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_never_overspends_by_more_than_one_call_under_parallel_jobs(alice_ws, fake_llm: FakeLlm, settings):
    """The fake provider reports 15 tokens a call; 24 threads race to spend a 400-token budget."""
    settings.GRAPH_LLM_DAILY_TOKEN_BUDGET = BUDGET
    settings.GRAPH_LLM_MAX_OUTPUT_TOKENS = 16
    fake_llm.answers["entity_extraction"] = {"entities": [], "facts": []}
    fake_llm.delay["entity_extraction"] = 0.05
    outcomes: list[str] = []

    def one_call() -> None:
        try:
            llm.llm_structured(
                workspace_id=alice_ws,
                purpose="entity_extraction",
                system="You extract entities and facts from a note.",
                user="x",
                answer_model=llm_answer_model(),
            )
            outcomes.append("ok")
        except llm.LlmBudgetExhausted:
            outcomes.append("exhausted")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one_call) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with workspace_context(alice_ws):
        rows = list(LlmUsage.objects.values_list("prompt_tokens", "completion_tokens", "error_code"))
    spent = sum(p + c for p, c, _ in rows)
    per_call = 15
    assert outcomes.count("exhausted") > 0 and outcomes.count("ok") >= BUDGET // 60
    assert spent <= BUDGET + per_call, (spent, outcomes)
    assert not [code for _, _, code in rows if code == "IN_FLIGHT"]  # every reservation was settled


def llm_answer_model() -> Any:
    from graphsvc.entities import ExtractionAnswer

    return ExtractionAnswer
