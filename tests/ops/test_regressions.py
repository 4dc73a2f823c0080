"""Bugs the fuzzer found, each pinned by the smallest request that showed it."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "path", ["graph/status", "graph/rollout", "graph/extraction", "graph/settings", "memories/settings"]
)
@pytest.mark.parametrize("query", ["projectId=", "userId=%20", "tenantId=a%00b"])
def test_it_answers_400_not_500_for_a_scope_query_that_scope_refuses(alice_api, path, query):
    # The query schemas accepted what ScopeIn refuses (empty, blank, NUL), so ScopeIn raised inside the
    # handler. memories/settings had its own copy of the bug; the 1000-example fuzz run found it.
    response = alice_api.get(f"{path}?{query}")
    assert response.status_code == 400, response.content  # the project's validation status
    error = response.json()["error"]
    assert (
        error["type"] == "validation_error" and error["retryable"] is False and "scope" not in error["code"]
    )


def test_it_dead_letters_a_job_whose_worker_dies_on_every_attempt(alice_api, personas):
    # A job whose task is killed each time (kill -9, OOM, past the timeout) never reached jobs_fail, so the
    # re-delivered message claimed it again and again, attempts climbing past MAX_ATTEMPTS, forever.
    from datetime import timedelta

    from django.utils import timezone

    from memories.models import PipelineJob
    from pipeline import jobs
    from pipeline import services as pipeline
    from tenancy.rls import workspace_context

    memory = alice_api.add("a job that always loses its worker")
    workspace_id = personas.alice.personal_workspace.id
    with workspace_context(workspace_id):
        job = PipelineJob.objects.get(memory_id=memory["id"], kind="embed")
        PipelineJob.objects.filter(pk=job.pk).update(
            status="processing", attempts=jobs.MAX_ATTEMPTS, started_at=timezone.now() - timedelta(hours=1)
        )
    assert pipeline.job_run(workspace_id=workspace_id, job_id=job.pk) == 0
    with workspace_context(workspace_id):
        job.refresh_from_db()
    assert (job.status, job.last_error_code, job.attempts) == (
        "dead_letter",
        "JOB_WORKER_LOST",
        jobs.MAX_ATTEMPTS,
    )


@pytest.mark.parametrize(
    "body", [{"cursor": "\u00b9"}, {"cursor": "99999999999999999999"}, {"type": "to\u0000ol"}]
)
def test_it_answers_400_not_500_for_a_graph_entities_page_it_cannot_read(alice_api, body):
    # The 1000-example fuzz run: '¹'.isdigit() is true but int() refuses it, a cursor past bigint overflowed
    # in Postgres, and a NUL in type reached a text column.
    response = alice_api.post("graph/entities", body)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["retryable"] is False
