"""A model per task: extraction, community summaries and memory scores each use their own model when one is
set (GRAPH_LLM_MODEL_EXTRACTION, _SUMMARY, _SCORING) and GRAPH_LLM_MODEL otherwise; a task runs when it has a
model, whether or not the others do. Calls go over HTTP to the fake OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from graphsvc import llm
from graphsvc.upkeep import SummaryAnswer
from memories.models import PipelineJob
from tenancy.rls import workspace_context
from tests.helpers.fake_openai import FakeProvider


@pytest.fixture
def provider(settings) -> Iterator[FakeProvider]:
    fake = FakeProvider()
    fake.chat_answer = lambda body: json.dumps(
        {"score": 0.9} if "important" in body["messages"][0]["content"] else {"summary": "A summary."}
    )
    settings.GRAPH_LLM_API_BASE = fake.start()
    settings.GRAPH_LLM_API_KEY = "test-key"
    settings.GRAPH_LLM_MAX_RETRIES = 0
    yield fake
    fake.stop()


def models_asked(provider: FakeProvider) -> list[str]:
    return [r["body"]["model"] for r in provider.requests if r["path"].endswith("/chat/completions")]


def summary(workspace_id: int) -> Any:
    return llm.llm_structured(
        workspace_id=workspace_id,
        purpose="community_summary",
        system="summarize",
        user="Entities: a, b",
        answer_model=SummaryAnswer,
    )


def test_it_asks_each_task_its_own_model_and_falls_back_to_the_default(alice_ws, provider, settings):
    settings.GRAPH_LLM_MODEL = "openai/default-model"
    settings.GRAPH_LLM_MODEL_SUMMARY = "openai/summary-model"
    settings.GRAPH_LLM_MODEL_EXTRACTION = ""
    assert llm.model_for("community_summary") == "openai/summary-model"
    assert llm.model_for("entity_extraction") == llm.model_for("pairwise") == "openai/default-model"
    assert llm.model_for("importance") == llm.model_for(None) == "openai/default-model"
    assert summary(alice_ws).summary == "A summary."
    assert models_asked(provider) == ["summary-model"]
    with workspace_context(alice_ws):
        from graphsvc.models import LlmUsage

        assert list(LlmUsage.objects.values_list("purpose", "model")) == [
            ("community_summary", "openai/summary-model")
        ]


def test_it_scores_memories_with_the_scoring_model_while_extraction_is_off(
    personas, alice_ws, provider, settings
):
    settings.GRAPH_LLM_MODEL = ""
    settings.GRAPH_LLM_MODEL_SCORING = "openai/scoring-model"
    settings.MEMORY_IMPORTANCE_LLM = True
    assert not llm.llm_enabled() and not llm.llm_enabled("community_summary")
    added = personas.alice_api.add("The billing service retries declined cards twice")
    assert added["importance"] == pytest.approx(0.9) and models_asked(provider) == ["scoring-model"]
    with workspace_context(alice_ws):
        # No extraction model: no relate or extract jobs were queued for the memory.
        assert not PipelineJob.objects.filter(kind__in=["relate", "extract"]).exists()
    with pytest.raises(llm.LlmError):  # nor a summary model: the task is off, and says so
        summary(alice_ws)
