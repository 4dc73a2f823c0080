"""An add writes its job and the job's broker message in one statement; the message names the job by (memory,
kind) and the real django-q2 task runs it; messages that name a job id (retries, deferrals) still work."""

from __future__ import annotations

from django.db import connections
from django.test.utils import CaptureQueriesContext
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from memories import jobs, tasks
from memories.models import MemoryEmbedding, PipelineJob
from tenancy.rls import workspace_context
from tests.memories.helpers import personal_workspace_id


def messages() -> list[dict]:
    return [SignedPackage.loads(message.payload) for message in OrmQ.objects.using("app").order_by("id")]


def run_message(task: dict) -> int:
    # What a django-q2 worker does with the message: import `func` and call it with `args`.
    module, name = task["func"].rsplit(".", 1)
    assert module == "memories.tasks"
    return getattr(tasks, name)(*task["args"])


def test_it_writes_the_job_and_its_message_in_one_statement(alice_api, personas, local_embedder):
    workspace_id = personal_workspace_id(personas.alice)
    alice_api.add("warm up")
    OrmQ.objects.using("app").all().delete()
    with CaptureQueriesContext(connections["app"]) as queries:
        memory = alice_api.add("Use pgbouncer in transaction mode for the API.")
    writes = [q["sql"] for q in queries.captured_queries if "pipeline_jobs" in q["sql"] or "django_q_ormq" in q["sql"]]
    assert len(writes) == 1 and "INSERT INTO django_q_ormq" in writes[0], writes

    [task] = messages()
    assert task["func"] == jobs.MEMORY_TASK_FUNC
    assert task["args"] == (workspace_id, memory["id"], jobs.Kind.EMBED)
    # Its job, and the warm-up's in the same embedding batch (that message was deleted above).
    assert run_message(task) == 2
    with workspace_context(workspace_id):
        assert PipelineJob.objects.get(memory_id=memory["id"], kind="embed").status == "succeeded"
        assert PipelineJob.objects.get(memory_id=memory["id"], kind="similarity").status == "succeeded"
        assert MemoryEmbedding.objects.filter(memory_id=memory["id"]).exists()
    # Run twice (a re-delivery): nothing left to claim.
    assert run_message(task) == 0


def test_it_still_runs_messages_that_name_a_job_id(alice_api, personas, local_embedder):
    workspace_id = personal_workspace_id(personas.alice)
    memory = alice_api.add("Rotate the signing keys every quarter.")
    OrmQ.objects.using("app").all().delete()
    with workspace_context(workspace_id):
        job = PipelineJob.objects.get(memory_id=memory["id"], kind="embed")
        jobs.broker_push(workspace_id=workspace_id, job_ids=[job.id])
    [task] = messages()
    assert task["func"] == jobs.TASK_FUNC and task["args"] == (workspace_id, job.id)
    assert run_message(task) == 1


def test_it_does_not_run_a_memory_message_in_another_workspace(alice_api, personas, local_embedder):
    # A message carries its workspace; claiming is scoped to it, so a memory id of another workspace claims nothing.
    memory = alice_api.add("Alice's staging password policy.")
    charlie_ws = personal_workspace_id(personas.charlie)
    assert tasks.pipeline_memory_job_run(charlie_ws, memory["id"], jobs.Kind.EMBED) == 0
    with workspace_context(personal_workspace_id(personas.alice)):
        assert PipelineJob.objects.get(memory_id=memory["id"], kind="embed").status == "queued"


def test_it_queues_one_message_per_memory_in_a_batch(alice_api, personas):
    workspace_id = personal_workspace_id(personas.alice)
    first = alice_api.add("one")
    second = alice_api.add("two")
    OrmQ.objects.using("app").all().delete()
    with workspace_context(workspace_id):
        ids = jobs.jobs_enqueue(workspace_id=workspace_id, memory_ids=[first["id"], second["id"]],
                                kind=jobs.Kind.EMBED)
    assert len(ids) == 2
    assert sorted(task["args"][1] for task in messages()) == sorted([first["id"], second["id"]])
