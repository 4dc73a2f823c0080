"""Background jobs (pipeline.background): created with their broker message in one transaction, run by the
real task function, progress written while the job's own transaction is open, failures shown by code and
class, and jobs/status + jobs/list confined to the caller's workspace."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections, transaction
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from config.errors import ApiError
from pipeline import background, tasks
from pipeline.models import BackgroundJob
from tenancy import services as tenancy_services
from tenancy.rls import workspace_context
from tests.conftest import SdkClient
from tests.memories.helpers import ACME_SCOPE


def _echo(job: background.JobRun) -> dict[str, Any]:
    for done in range(1, 4):
        job.progress(done=done, total=3, phase="echo")
    return {"echo": job.params.get("say")}


def _refuse(job: background.JobRun) -> dict[str, Any]:
    raise ApiError(422, "ECHO_REFUSED", "Line 3: 'say' is too loud.", details={"line": 3, "field": "say"})


def _crash(job: background.JobRun) -> dict[str, Any]:
    raise RuntimeError("provider said: secret-token-1234")


def _progress_seen(job: background.JobRun) -> dict[str, Any]:
    """Reports progress inside an open transaction, then reads it back from another connection."""
    seen: dict[str, Any] = {}
    with workspace_context(job.workspace_id):
        job.progress(done=7, total=10, phase="half", force=True)

        def read() -> None:
            with workspace_context(job.workspace_id):
                row = BackgroundJob.objects.get(pk=job.id)
                seen.update(done=row.done, total=row.total, phase=row.phase, status=row.status)
            connections.close_all()

        reader = threading.Thread(target=read)
        reader.start()
        reader.join()
    return seen


for _name, _run in (("test_echo", _echo), ("test_refuse", _refuse), ("test_crash", _crash)):
    background.job_kind_register(_name, _run)
background.job_kind_register("test_progress", _progress_seen)


def _messages() -> list[dict[str, Any]]:
    return [SignedPackage.loads(m.payload) for m in OrmQ.objects.using("app").order_by("id")]


def _job(workspace_id: int, job_id: Any) -> BackgroundJob:
    with workspace_context(workspace_id):
        return BackgroundJob.objects.get(pk=job_id)


def test_it_writes_the_job_and_its_message_in_one_transaction(alice_ws):
    job = background.job_create(workspace_id=alice_ws, kind="test_echo", params={"say": "hi"})
    (message,) = _messages()
    assert message["func"] == "pipeline.tasks.background_job_run"
    assert message["args"] == (alice_ws, str(job.id))
    assert message["timeout"] == 3600  # the job's own limit, not the cluster's 60 s

    with pytest.raises(RuntimeError), transaction.atomic(using="app"):
        background.job_create(workspace_id=alice_ws, kind="test_echo")
        raise RuntimeError("the caller fails after creating the job")
    assert len(_messages()) == 1
    with workspace_context(alice_ws):
        assert BackgroundJob.objects.count() == 1


def test_it_runs_a_job_through_the_task_and_records_its_result(alice_ws):
    job = background.job_create(workspace_id=alice_ws, kind="test_echo", params={"say": "hi"})
    assert tasks.background_job_run(alice_ws, str(job.id)) == "succeeded"
    done = _job(alice_ws, job.id)
    assert (done.status, done.result, done.attempts) == ("succeeded", {"echo": "hi"}, 1)
    assert done.started_at and done.finished_at and done.finished_at >= done.started_at
    # A message delivered again for a finished job does nothing.
    assert tasks.background_job_run(alice_ws, str(job.id)) == "finished"
    assert _job(alice_ws, job.id).attempts == 1


def test_it_shows_a_failure_by_code_and_class_never_the_exception_text(alice_api, alice_ws):
    refused = background.job_create(workspace_id=alice_ws, kind="test_refuse")
    crashed = background.job_create(workspace_id=alice_ws, kind="test_crash")
    assert tasks.background_job_run(alice_ws, str(refused.id)) == "failed"
    assert tasks.background_job_run(alice_ws, str(crashed.id)) == "failed"

    error = alice_api.ok("jobs/status", {"id": str(refused.id)})["error"]
    assert error == {
        "code": "ECHO_REFUSED",
        "errorClass": "validation_error",
        "message": "Line 3: 'say' is too loud.",
        "details": {"line": 3, "field": "say"},
    }
    answer = alice_api.post("jobs/status", {"id": str(crashed.id)})
    assert answer.json()["data"]["error"] == {
        "code": "JOB_FAILED",
        "errorClass": "RuntimeError",
        "message": None,
        "details": None,
    }
    assert b"secret-token" not in answer.content


def test_it_limits_the_jobs_a_workspace_has_queued(alice_ws):
    for _ in range(background.MAX_ACTIVE_PER_WORKSPACE):
        background.job_create(workspace_id=alice_ws, kind="test_echo")
    with pytest.raises(ApiError) as refused:
        background.job_create(workspace_id=alice_ws, kind="test_echo")
    assert refused.value.status == 429 and refused.value.code == "JOBS_LIMIT_REACHED"
    assert len(_messages()) == background.MAX_ACTIVE_PER_WORKSPACE


def test_it_leaves_a_delayed_message_when_another_worker_holds_the_job(alice_ws):
    job = background.job_create(workspace_id=alice_ws, kind="test_echo")
    OrmQ.objects.using("app").all().delete()
    held, release, released = threading.Event(), threading.Event(), threading.Event()

    def other_worker() -> None:
        with connections["app"].cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_lock(hashtextextended(%s, 0))", [f"cairn.background.run:{job.id}"]
            )
            held.set()
            release.wait(10)
            cursor.execute(
                "SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [f"cairn.background.run:{job.id}"]
            )
        connections.close_all()
        released.set()

    thread = threading.Thread(target=other_worker)
    thread.start()
    assert held.wait(10)
    try:
        assert tasks.background_job_run(alice_ws, str(job.id)) == "running elsewhere"
        (later,) = OrmQ.objects.using("app").all()
        assert later.lock > job.created_at  # not visible to workers until the retry delay has passed
        assert _job(alice_ws, job.id).status == "queued"
    finally:
        release.set()
        thread.join()
    assert released.is_set()
    assert tasks.background_job_run(alice_ws, str(job.id)) == "succeeded"


def test_it_runs_a_job_again_after_its_worker_died_and_gives_up_after_max_attempts(alice_ws):
    job = background.job_create(workspace_id=alice_ws, kind="test_echo", params={"say": "again"})
    with workspace_context(alice_ws):
        BackgroundJob.objects.filter(pk=job.id).update(status="running", attempts=1)
    assert tasks.background_job_run(alice_ws, str(job.id)) == "succeeded"
    assert _job(alice_ws, job.id).attempts == 2

    lost = background.job_create(workspace_id=alice_ws, kind="test_echo")
    with workspace_context(alice_ws):
        BackgroundJob.objects.filter(pk=lost.id).update(status="running", attempts=background.MAX_ATTEMPTS)
    assert tasks.background_job_run(alice_ws, str(lost.id)) == "finished"
    row = _job(alice_ws, lost.id)
    assert (row.status, row.error_code) == ("failed", "WORKER_LOST")


@pytest.mark.django_db(transaction=True, databases="__all__")
def test_it_shows_progress_while_the_jobs_own_transaction_is_open(personas):
    workspace_id = tenancy_services.personal_workspace_ensure(user=personas.alice).id
    job = background.job_create(workspace_id=workspace_id, kind="test_progress")
    assert tasks.background_job_run(workspace_id, str(job.id)) == "succeeded"
    assert _job(workspace_id, job.id).result == {"done": 7, "total": 10, "phase": "half", "status": "running"}


def test_it_answers_jobs_status_and_list_only_inside_the_callers_workspace(personas):
    alice, bob, charlie = personas.alice_api, personas.bob_api, personas.charlie_api
    first = background.job_create(workspace_id=personas.acme.id, kind="test_echo", created_by="user:1")
    second = background.job_create(workspace_id=personas.acme.id, kind="test_refuse")
    tasks.background_job_run(personas.acme.id, str(first.id))

    status = bob.ok("jobs/status", {"id": str(first.id), "scope": ACME_SCOPE})
    assert (status["status"], status["result"], status["done"], status["total"]) == (
        "succeeded",
        {"echo": None},
        3,
        3,
    )
    listed = bob.ok("jobs/list", {"scope": ACME_SCOPE})
    assert [job["id"] for job in listed["jobs"]] == [str(second.id), str(first.id)]
    assert bob.ok("jobs/list", {"scope": ACME_SCOPE, "limit": 1})["count"] == 1
    refused_only = bob.ok("jobs/list", {"scope": ACME_SCOPE, "kind": "test_refuse"})["jobs"]
    assert [job["id"] for job in refused_only] == [str(second.id)]

    # charlie naming acme's project lands in his own workspace: acme's job is not found there.
    charlie.error("jobs/status", {"id": str(first.id), "scope": ACME_SCOPE}, status=404, code="JOB_NOT_FOUND")
    assert charlie.ok("jobs/list", {"scope": ACME_SCOPE})["jobs"] == []
    # alice's personal workspace is not acme either; a malformed id is a 404 too.
    alice.error("jobs/status", {"id": str(first.id)}, status=404, code="JOB_NOT_FOUND")
    alice.error("jobs/status", {"id": "not-a-uuid", "scope": ACME_SCOPE}, status=404, code="JOB_NOT_FOUND")


def test_it_lets_a_read_key_follow_a_job_and_refuses_no_key(personas, anonymous_api):
    job = background.job_create(workspace_id=personas.acme.id, kind="test_echo")
    reader = SdkClient(
        personas.bob_api.client, tenancy_services.api_key_create(user=personas.bob, scope="read").raw_key
    )
    assert reader.ok("jobs/status", {"id": str(job.id), "scope": ACME_SCOPE})["status"] == "queued"
    anonymous_api.error("jobs/status", {"id": str(job.id)}, status=401, code="MISSING_API_KEY")
    anonymous_api.error("jobs/list", {}, status=401, code="MISSING_API_KEY")
