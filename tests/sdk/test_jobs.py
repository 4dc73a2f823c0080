"""cairn_sdk's jobs namespace against a live server: a background job's status, progress, result and error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from cairn_sdk import AsyncCairn, Cairn, JobFailedError, JobTimeoutError, NotFoundError, models

from config.errors import ApiError
from pipeline import background, tasks
from tests.sdk.conftest import LIVE, Account

pytestmark = LIVE


def _count(job: background.JobRun) -> dict[str, Any]:
    job.progress(done=2, total=2, phase="counting")
    return {"counted": 2}


def _refuse(job: background.JobRun) -> dict[str, Any]:
    raise ApiError(422, "SDK_JOB_REFUSED", "Line 2 is not valid.", details={"line": 2})


background.job_kind_register("sdk_test_count", _count)
background.job_kind_register("sdk_test_refuse", _refuse)


def test_it_follows_a_job_from_queued_to_its_result_or_error(
    cairn: Cairn, alice: Account, bob: Account, base_url
):
    workspace_id = alice.workspace().id
    job = background.job_create(workspace_id=workspace_id, kind="sdk_test_count")
    queued = cairn.jobs.status(str(job.id))
    assert isinstance(queued, models.Job)
    assert (queued.status, queued.kind, queued.started_at, queued.error) == (
        "queued",
        "sdk_test_count",
        None,
        None,
    )

    assert tasks.background_job_run(workspace_id, str(job.id)) == "succeeded"
    done = cairn.jobs.status(str(job.id))
    assert (done.status, done.done, done.total, done.result) == ("succeeded", 2, 2, {"counted": 2})
    assert done.finished_at is not None and done.started_at is not None

    refused = background.job_create(workspace_id=workspace_id, kind="sdk_test_refuse")
    assert tasks.background_job_run(workspace_id, str(refused.id)) == "failed"
    failed = cairn.jobs.status(str(refused.id))
    assert failed.status == "failed" and failed.error is not None
    assert (failed.error.code, failed.error.error_class, failed.error.details) == (
        "SDK_JOB_REFUSED",
        "validation_error",
        {"line": 2},
    )

    listed = cairn.jobs.list()
    assert [j.id for j in listed.jobs] == [str(refused.id), str(job.id)] and listed.count == 2  # newest first
    assert [j.id for j in cairn.jobs.list(kind="sdk_test_count").jobs] == [str(job.id)]
    assert cairn.jobs.list(limit=1).count == 1
    assert cairn.jobs.list(scope={"tenantId": "elsewhere"}).jobs == []  # another workspace's jobs

    with Cairn(bob.key, base_url=base_url) as bobs:
        with pytest.raises(NotFoundError) as foreign:
            bobs.jobs.status(str(job.id))
        assert foreign.value.code == "JOB_NOT_FOUND"


def test_it_reads_jobs_the_same_asynchronously(alice: Account, base_url):
    job = background.job_create(workspace_id=alice.workspace().id, kind="sdk_test_count")

    async def scenario() -> None:
        async with AsyncCairn(alice.key, base_url=base_url, timeout=30) as cairn:
            status, listed = await asyncio.gather(cairn.jobs.status(str(job.id)), cairn.jobs.list())
            assert status.status == "queued" and [j.id for j in listed.jobs] == [str(job.id)]
            with pytest.raises(NotFoundError):
                await cairn.jobs.status("00000000-0000-0000-0000-000000000000")

    asyncio.run(scenario())


def test_it_waits_for_a_job_polling_sooner_first_then_every_interval(cairn: Cairn, alice: Account):
    workspace_id = alice.workspace().id
    job = background.job_create(workspace_id=workspace_id, kind="sdk_test_count")
    waits: list[float] = []

    def sleep(seconds: float) -> None:  # the worker finishes the job while the client waits its fourth time
        waits.append(seconds)
        if len(waits) == 4:
            tasks.background_job_run(workspace_id, str(job.id))

    cairn._sleep = sleep
    done = cairn.jobs.wait(str(job.id), poll_interval=0.5)
    assert (done.status, done.result) == ("succeeded", {"counted": 2})
    assert waits == [0.2, 0.4, 0.5, 0.5]  # 0.2 s doubling, up to the interval; then one more status

    waits.clear()
    assert cairn.jobs.wait(str(job.id)).status == "succeeded" and waits == []  # finished: no waiting

    refused = background.job_create(workspace_id=workspace_id, kind="sdk_test_refuse")
    cairn._sleep = lambda seconds: tasks.background_job_run(workspace_id, str(refused.id))
    with pytest.raises(JobFailedError) as failed:
        cairn.jobs.wait(str(refused.id))
    error = failed.value
    assert (error.code, error.error_class, error.details, error.message) == (
        "SDK_JOB_REFUSED",
        "validation_error",
        {"line": 2},
        "Line 2 is not valid.",
    )
    assert (error.job_id, error.kind, error.job.status) == (str(refused.id), "sdk_test_refuse", "failed")
    assert str(error).startswith("SDK_JOB_REFUSED (validation_error): the sdk_test_refuse job")


def test_it_stops_waiting_after_the_timeout_and_the_job_goes_on(cairn: Cairn, alice: Account):
    workspace_id = alice.workspace().id
    job = background.job_create(workspace_id=workspace_id, kind="sdk_test_count")
    with pytest.raises(JobTimeoutError) as slow:
        cairn.jobs.wait(str(job.id), timeout=0.3, poll_interval=0.05)
    assert isinstance(slow.value, TimeoutError) and slow.value.timeout == 0.3
    assert (slow.value.job_id, slow.value.job.status) == (str(job.id), "queued")
    assert "still queued after 0.3 s" in str(slow.value)
    with pytest.raises(JobTimeoutError):
        cairn.jobs.wait(str(job.id), timeout=0)  # one look, no waiting

    assert tasks.background_job_run(workspace_id, str(job.id)) == "succeeded"
    assert cairn.jobs.wait(str(job.id), timeout=0).result == {"counted": 2}  # done by now: no wait needed
    for bad in ({"poll_interval": 0}, {"poll_interval": -1}, {"timeout": -1}):
        with pytest.raises(ValueError):
            cairn.jobs.wait(str(job.id), **bad)
    with pytest.raises(NotFoundError):
        cairn.jobs.wait("00000000-0000-0000-0000-000000000000")


def test_it_waits_the_same_asynchronously(alice: Account, base_url):
    workspace_id = alice.workspace().id
    job = background.job_create(workspace_id=workspace_id, kind="sdk_test_count")
    refused = background.job_create(workspace_id=workspace_id, kind="sdk_test_refuse")
    never_run = background.job_create(workspace_id=workspace_id, kind="sdk_test_count")

    async def scenario() -> None:
        async with AsyncCairn(alice.key, base_url=base_url, timeout=30) as cairn:
            waits: list[float] = []

            async def sleep(seconds: float) -> None:
                waits.append(seconds)
                # The worker, in a thread of its own (database work stays out of the event loop).
                await asyncio.to_thread(tasks.background_job_run, workspace_id, str(job.id))

            cairn._sleep = sleep
            done = await cairn.jobs.wait(str(job.id), poll_interval=1)
            assert done.result == {"counted": 2} and waits == [0.2]

            await asyncio.to_thread(tasks.background_job_run, workspace_id, str(refused.id))
            with pytest.raises(JobFailedError) as failed:
                await cairn.jobs.wait(str(refused.id))
            assert failed.value.code == "SDK_JOB_REFUSED"

            cairn._sleep = asyncio.sleep
            with pytest.raises(JobTimeoutError) as slow:
                await cairn.jobs.wait(str(never_run.id), timeout=0.1, poll_interval=0.05)
            assert slow.value.job.status == "queued"

    asyncio.run(scenario())
