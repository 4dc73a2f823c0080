"""Dependencies failing: the embedding provider and the LLM down, slow (beyond the timeout), answering 429 or
500. Writes still answer 201, search falls back and says why, graph/status shows the errors, and the queued
work finishes once the dependency is back. Real job code, real HTTP to the local fake provider (litellm)."""

from __future__ import annotations

import time

import pytest

from memories.models import PipelineJob
from pipeline import services as pipeline
from retrieval.embeddings import reset_embedders
from tenancy.rls import workspace_context
from tests.helpers.fake_openai import FakeProvider
from tests.memories.helpers import personal_workspace_id

CLOSED_PORT = "http://127.0.0.1:9/v1"


@pytest.fixture
def provider(settings):
    fake = FakeProvider(dimension=8)
    fake.failure = None  # type: ignore[attr-defined]
    fake.target = None  # type: ignore[attr-defined]

    def before(path: str, body: dict) -> tuple[int, dict] | None:
        hit = (fake.target == "embeddings") == path.endswith("/embeddings")  # type: ignore[attr-defined]
        if not hit or fake.failure is None:  # type: ignore[attr-defined]
            return None
        if fake.failure == "slow":  # type: ignore[attr-defined]
            time.sleep(2.5)  # beyond the 1 s timeouts below
            return None
        status = int(fake.failure)  # type: ignore[attr-defined]
        return status, {
            "error": {"message": f"injected {status}", "type": "server_error", "code": str(status)}
        }

    fake.before_answer = before
    fake.chat_answer = lambda body: (
        '{"entities": [], "facts": [], "edges": [], "relationship": "unrelated", '
        '"confidence": 0.9, "explanation": "-", "evidence": ""}'
    )
    url = fake.start()
    settings.EMBEDDING_MODEL = "openai/fake-embed"
    settings.EMBEDDING_API_BASE = url
    settings.EMBEDDING_API_KEY = "test-key"
    settings.EMBEDDING_DIMENSION = 8
    settings.EMBEDDING_TIMEOUT_SECONDS = 1
    settings.GRAPH_LLM_MODEL = "openai/fake-chat"
    settings.GRAPH_LLM_API_BASE = url
    settings.GRAPH_LLM_API_KEY = "test-key"
    settings.GRAPH_LLM_MAX_RETRIES = 0
    settings.GRAPH_LLM_TIMEOUT_SECONDS = 1
    reset_embedders()
    fake.url = url  # type: ignore[attr-defined]
    yield fake
    fake.stop()
    reset_embedders()


def job_states(workspace_id: int, memory_id: str) -> dict[str, tuple[str, str | None]]:
    with workspace_context(workspace_id):
        return {
            job.kind: (job.status, job.last_error_code)
            for job in PipelineJob.objects.filter(memory_id=memory_id)
        }


@pytest.mark.parametrize("target", ["embeddings", "llm"])
@pytest.mark.parametrize("failure", ["down", "slow", "429", "500"])
def test_it_keeps_writing_and_recovers_when_a_dependency_fails(personas, provider, settings, target, failure):
    api, workspace_id = personas.alice_api, personal_workspace_id(personas.alice)
    if failure == "down":
        if target == "embeddings":
            settings.EMBEDDING_API_BASE = CLOSED_PORT
        else:
            settings.GRAPH_LLM_API_BASE = CLOSED_PORT
        reset_embedders()
    else:
        provider.target, provider.failure = target, failure

    memory = api.add("Ada moved the billing service to Postgres last week")  # 201 whatever the provider does
    pipeline.jobs_run_pending(workspace_id=workspace_id, max_jobs=10)
    states = job_states(workspace_id, memory["id"])
    failed_kind = "embed" if target == "embeddings" else next(k for k in ("relate", "extract") if k in states)
    status, code = states[failed_kind]
    assert status == "queued" and code, states  # waiting for a retry, with the reason recorded

    found = api.ok("memories/search", {"query": "billing", "strategy": "hybrid"})
    assert found["memories"][0]["id"] == memory["id"]  # lexical results keep flowing
    if target == "embeddings":
        assert found["trace"]["fallbackReason"] == "query_embedding_unavailable"
    graph_status = api.ok("graph/status", {})
    assert graph_status["recentErrors"] or graph_status["pipeline"].get("retrying"), graph_status

    # The dependency comes back: the queued work completes, nothing was lost.
    provider.failure = None
    settings.EMBEDDING_API_BASE = settings.GRAPH_LLM_API_BASE = provider.url
    reset_embedders()
    pipeline.jobs_run_pending(workspace_id=workspace_id, include_delayed=True)
    after = job_states(workspace_id, memory["id"])
    assert set(states) <= set(after) and {state[0] for state in after.values()} == {"succeeded"}, after
    found = api.ok("memories/search", {"query": "billing", "strategy": "hybrid"})
    assert found["trace"].get("fallbackReason") in (None, "")
