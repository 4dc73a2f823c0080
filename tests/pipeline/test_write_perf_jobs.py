"""An add writes its job and, when no other embedding job of the workspace is queued, one broker message
in the same statement; a burst of adds shares one message per batch (coalesced), and the real django-q2
task functions run them; messages that name a job id (retries, deferrals) or a memory (queued before
coalescing) still work."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from memories.models import MemoryEmbedding, PipelineJob
from pipeline import jobs, tasks
from pipeline import services as pipeline
from tenancy.rls import workspace_context
from tests.memories.helpers import ids, personal_workspace_id


def messages() -> list[dict]:
    return [SignedPackage.loads(message.payload) for message in OrmQ.objects.using("app").order_by("id")]


def run_message(task: dict) -> int:
    # What a django-q2 worker does with the message: import `func` and call it with `args`.
    module, name = task["func"].rsplit(".", 1)
    assert module == "pipeline.tasks"
    return getattr(tasks, name)(*task["args"])


def test_it_writes_the_job_and_its_message_in_one_statement(alice_api, personas, local_embedder):
    workspace_id = personal_workspace_id(personas.alice)
    alice_api.add("warm up")
    pipeline.jobs_run_pending(workspace_id=workspace_id)
    OrmQ.objects.using("app").all().delete()
    with CaptureQueriesContext(connections["app"]) as queries:
        memory = alice_api.add("Use pgbouncer in transaction mode for the API.")
    writes = [
        q["sql"]
        for q in queries.captured_queries
        if "pipeline_jobs" in q["sql"] or "django_q_ormq" in q["sql"]
    ]
    assert len(writes) == 1 and "INSERT INTO django_q_ormq" in writes[0], writes

    # Nothing else queued: the add brings its own message, which names the workspace and the kind.
    [task] = messages()
    assert task["func"] == jobs.KIND_TASK_FUNC
    assert task["args"] == (workspace_id, jobs.Kind.EMBED)
    assert run_message(task) == 1
    with workspace_context(workspace_id):
        assert PipelineJob.objects.get(memory_id=memory["id"], kind="embed").status == "succeeded"
        assert PipelineJob.objects.get(memory_id=memory["id"], kind="similarity").status == "succeeded"
        assert MemoryEmbedding.objects.filter(memory_id=memory["id"]).exists()
    # Run twice (a re-delivery): nothing left to claim.
    assert run_message(task) == 0


def test_it_coalesces_a_burst_of_adds_into_one_message(alice_api, personas, local_embedder):
    workspace_id = personal_workspace_id(personas.alice)
    added = [alice_api.add(f"Deploy note {n}: the canary runs for ten minutes.") for n in range(5)]
    # The first add found nothing queued and wrote a message; the four after it rode on the queued jobs.
    [task] = messages()
    assert task["func"] == jobs.KIND_TASK_FUNC
    assert run_message(task) == 5
    with workspace_context(workspace_id):
        states = set(PipelineJob.objects.filter(memory_id__in=ids(added)).values_list("kind", "status"))
    assert states == {("embed", "succeeded"), ("similarity", "succeeded")}


def test_it_queues_the_next_batch_when_a_claim_is_full(alice_api, personas, local_embedder, monkeypatch):
    monkeypatch.setattr(pipeline, "EMBED_BATCH_SIZE", 2)
    workspace_id = personal_workspace_id(personas.alice)
    added = [alice_api.add(f"Incident {n}: the disk filled up overnight.") for n in range(5)]
    [first] = messages()
    OrmQ.objects.using("app").all().delete()  # as the broker would once the task is acknowledged
    ran = [run_message(first)]
    while queued := messages():
        # A full batch leaves one follow-up message behind (never one per job), until nothing is due.
        assert len(queued) == 1
        OrmQ.objects.using("app").all().delete()
        ran.append(run_message(queued[0]))
    assert ran == [2, 2, 1]
    with workspace_context(workspace_id):
        assert set(
            PipelineJob.objects.filter(memory_id__in=ids(added), kind="embed").values_list(
                "status", flat=True
            )
        ) == {"succeeded"}


def test_it_does_not_ride_on_a_job_whose_message_was_lost(alice_api, personas, local_embedder):
    # A queued job older than the broker's retry window may have lost its message (a purged queue, a message
    # django-q2 gave up on): the next add brings a message of its own, and that batch takes the old job along.
    workspace_id = personal_workspace_id(personas.alice)
    orphan = alice_api.add("Orphaned by a purged queue.")
    OrmQ.objects.using("app").all().delete()
    with workspace_context(workspace_id):
        PipelineJob.objects.filter(memory_id=orphan["id"]).update(
            run_after=timezone.now() - timedelta(seconds=settings.Q_CLUSTER["retry"] + 1)
        )
    fresh = alice_api.add("Written after the purge.")
    [task] = messages()
    assert run_message(task) == 2
    with workspace_context(workspace_id):
        assert set(
            PipelineJob.objects.filter(memory_id__in=[orphan["id"], fresh["id"]], kind="embed").values_list(
                "status", flat=True
            )
        ) == {"succeeded"}


def test_it_takes_due_jobs_along_when_its_own_job_is_done(alice_api, personas, local_embedder):
    # An older message that names a job by memory: its job was taken by another batch, but jobs queued since
    # may be counting on any message of the kind.
    workspace_id = personal_workspace_id(personas.alice)
    done = alice_api.add("Already embedded.")
    pipeline.jobs_run_pending(workspace_id=workspace_id)
    OrmQ.objects.using("app").all().delete()
    waiting = alice_api.add("Queued without a message of its own.")
    OrmQ.objects.using("app").all().delete()
    assert tasks.pipeline_memory_job_run(workspace_id, done["id"], jobs.Kind.EMBED) == 1
    with workspace_context(workspace_id):
        assert PipelineJob.objects.get(memory_id=waiting["id"], kind="embed").status == "succeeded"


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
    # Claiming is scoped to the workspace the message carries: another workspace's memory id claims nothing.
    memory = alice_api.add("Alice's staging password policy.")
    charlie_ws = personal_workspace_id(personas.charlie)
    assert tasks.pipeline_memory_job_run(charlie_ws, memory["id"], jobs.Kind.EMBED) == 0
    with workspace_context(personal_workspace_id(personas.alice)):
        assert PipelineJob.objects.get(memory_id=memory["id"], kind="embed").status == "queued"


def test_it_queues_one_message_for_a_batch_of_memories(alice_api, personas):
    # One message per call, not per memory (jobs_enqueue for several memories: reembed, imports).
    workspace_id = personal_workspace_id(personas.alice)
    first = alice_api.add("one")
    second = alice_api.add("two")
    with workspace_context(workspace_id):
        PipelineJob.objects.all().delete()
    OrmQ.objects.using("app").all().delete()
    with workspace_context(workspace_id):
        ids_ = jobs.jobs_enqueue(
            workspace_id=workspace_id, memory_ids=[first["id"], second["id"]], kind=jobs.Kind.EMBED
        )
    assert len(ids_) == 2
    assert [task["args"] for task in messages()] == [(workspace_id, jobs.Kind.EMBED)]


def test_it_keeps_one_message_per_memory_for_llm_steps(alice_api, personas):
    # LLM steps are not batched (each is a slow model call), so their messages still name one memory each.
    workspace_id = personal_workspace_id(personas.alice)
    first = alice_api.add("one")
    second = alice_api.add("two")
    OrmQ.objects.using("app").all().delete()
    with workspace_context(workspace_id):
        jobs.jobs_enqueue(
            workspace_id=workspace_id, memory_ids=[first["id"], second["id"]], kind=jobs.Kind.RELATE
        )
    assert sorted(task["args"][1] for task in messages()) == sorted([first["id"], second["id"]])


def test_it_loads_the_local_model_when_a_qcluster_worker_starts(settings, monkeypatch):
    # In `manage.py qcluster` with a local model, each new worker (django-q2's post_spawn, after the fork)
    # loads the weights before its first job, instead of inside it.
    from django.apps import apps
    from django_q.signals import post_spawn

    from retrieval import embeddings

    settings.EMBEDDING_MODEL = "local/all-MiniLM-L6-v2"
    monkeypatch.setattr("sys.argv", ["manage.py", "qcluster"])
    loaded: list[str] = []
    monkeypatch.setattr(embeddings.LocalEmbedder, "embed", lambda self, texts: loaded.append(self.model))
    try:
        apps.get_app_config("retrieval").ready()
        post_spawn.send(sender="django_q", proc_name="Process-test")
    finally:
        post_spawn.disconnect(dispatch_uid="cairn-embedder-warm")
    assert loaded == ["local/all-MiniLM-L6-v2"]
