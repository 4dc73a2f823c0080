"""cairn_sdk's workspace export/import against a live server and a worker: each is a background job the SDK
starts, waits for (jobs/status) and then reads (the export's download, the import's report)."""

from __future__ import annotations

import asyncio
import inspect
import io
import json

import pytest
from cairn_sdk import (
    APIConnectionError,
    AsyncCairn,
    AuthenticationError,
    BadRequestError,
    Cairn,
    ConflictError,
    JobFailedError,
    JobTimeoutError,
    NotFoundError,
    models,
)

from tests.sdk.conftest import LIVE, Account, Worker
from tests.sdk.test_retries import FAST

pytestmark = LIVE
# Characters the server writes unescaped inside JSON strings, and that str.splitlines would cut a line at.
ODD = "line\u2028separator, next\u0085line, carriage\rreturn"
QUICK = {"poll_interval": 0.05, "timeout": 60}


def seed(cairn: Cairn) -> None:
    cairn.memories.add("We deploy with blue-green releases on Fridays", tags=["deploy"])
    cairn.memories.add(ODD, type="fact")
    forgotten = cairn.memories.add("an old idea")
    cairn.memories.forget(forgotten.id)  # tombstones travel too


def contents(cairn: Cairn, tenant: str) -> list[str]:
    return sorted(memory.content for memory in cairn.with_scope(tenant_id=tenant).memories.iter())


def test_it_exports_and_imports_into_another_tenant_and_twice_changes_nothing(cairn, worker):
    seed(cairn)
    records = list(cairn.workspace.export(**QUICK))
    assert records[0]["kind"] == "header" and records[0]["format"] == "cairn.workspace-export"
    assert records[-1]["kind"] == "trailer"
    counts = records[-1]["counts"]
    assert counts["memory"] == 3 and not any(r["kind"] == "embedding" for r in records)
    assert ODD in [r.get("content") for r in records]  # one line, not cut at U+2028

    report = cairn.workspace.import_(records, scope={"tenantId": "copy"}, **QUICK)
    assert isinstance(report, models.ImportReport)
    assert report.created["memory"] == 3 and report.skipped == {} and report.adjusted == []
    assert report.embed_jobs_queued == 2  # the live memories came without vectors; the tombstone needs none
    copied = list(cairn.workspace.export(scope={"tenantId": "copy"}, **QUICK))
    assert copied[-1]["counts"] == counts
    assert contents(cairn, "copy") == sorted(["We deploy with blue-green releases on Fridays", ODD])

    again = cairn.workspace.import_(cairn.workspace.export(**QUICK), scope={"tenantId": "copy"}, **QUICK)
    assert again.created == {} and again.skipped["memory"] == 3 and again.workspace_id == report.workspace_id
    assert list(cairn.workspace.export(scope={"tenantId": "copy"}, **QUICK))[-1]["counts"] == counts

    # Each call was one job, in the workspace it concerned.
    assert [job.kind for job in cairn.jobs.list().jobs] == ["workspace_export"] * 2
    copy_jobs = cairn.jobs.list(scope={"tenantId": "copy"}).jobs
    assert sorted(job.kind for job in copy_jobs) == ["workspace_export"] * 2 + ["workspace_import"] * 2
    assert all(job.status == "succeeded" for job in copy_jobs)


def test_it_writes_the_export_to_a_path_or_a_file_object_and_imports_the_file(cairn, alice, tmp_path, worker):
    seed(cairn)
    path = tmp_path / "ws.jsonl"
    counts = cairn.workspace.export_to(path, include_embeddings=True, **QUICK)
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and json.loads(lines[0])["includesEmbeddings"] is True
    assert json.loads(lines[-2]) == {"kind": "trailer", "counts": counts}
    assert not (tmp_path / "ws.jsonl.part").exists()

    buffer = io.BytesIO()
    assert cairn.workspace.export_to(buffer, include_embeddings=True, **QUICK) == counts
    assert [json.loads(line)["kind"] for line in buffer.getvalue().splitlines()] == [
        json.loads(line)["kind"] for line in lines[:-1]
    ]

    tenant = cairn.with_scope(tenant_id="from-file")  # the default scope travels as ?tenantId=
    report = tenant.workspace.import_(path, **QUICK)
    assert report.created["memory"] == 3 and report.workspace_id != alice.workspace().id
    assert tenant.workspace.import_(path.read_bytes(), **QUICK).created == {}


def test_it_offers_each_step_of_the_jobs_for_callers_that_follow_them(cairn, worker: Worker, tmp_path):
    seed(cairn)
    worker.paused.set()
    started = cairn.workspace.start_export()
    assert isinstance(started, models.JobAccepted)
    assert (started.job.kind, started.job.status, started.job_id) == (
        "workspace_export",
        "queued",
        started.job.id,
    )
    with pytest.raises(ConflictError) as not_ready:
        cairn.workspace.download_export(started.job_id, tmp_path / "early.jsonl")
    assert not_ready.value.code == "EXPORT_NOT_READY" and not_ready.value.details == {"status": "queued"}
    assert not (tmp_path / "early.jsonl").exists() and not (tmp_path / "early.jsonl.part").exists()

    worker.paused.clear()
    done = cairn.jobs.wait(started.job_id, **QUICK)
    result = models.ExportJobResult.model_validate(done.result)
    assert done.status == "succeeded" and result.includes_embeddings is False
    path = tmp_path / "ws.jsonl"
    counts = cairn.workspace.download_export(started.job_id, path)
    assert counts["memory"] == 3 and path.stat().st_size == result.bytes
    assert len(path.read_bytes().splitlines()) == result.lines

    upload = cairn.workspace.start_import(path, scope={"tenantId": "steps"})
    assert upload.job.kind == "workspace_import" and upload.job.total == result.lines  # lines of the file
    imported = cairn.jobs.wait(upload.job_id, scope={"tenantId": "steps"}, **QUICK)
    assert models.ImportReport.model_validate(imported.result).created["memory"] == 3

    with pytest.raises(NotFoundError) as not_an_export:  # an import job has no file to download
        cairn.workspace.download_export(upload.job_id, tmp_path / "x.jsonl", scope={"tenantId": "steps"})
    assert not_an_export.value.code == "JOB_NOT_FOUND"
    with pytest.raises(NotFoundError):  # another workspace's job
        cairn.workspace.download_export(started.job_id, tmp_path / "x.jsonl", scope={"tenantId": "steps"})


def test_a_job_that_outlasts_the_wait_goes_on_and_can_be_fetched_later(cairn, worker: Worker, tmp_path):
    seed(cairn)
    worker.paused.set()
    path = tmp_path / "ws.jsonl"
    with pytest.raises(JobTimeoutError) as slow:
        cairn.workspace.export_to(path, timeout=0.3, poll_interval=0.05)
    assert isinstance(slow.value, TimeoutError) and slow.value.job.status == "queued"
    assert slow.value.kind == "workspace_export" and "jobs.wait" in str(slow.value)
    assert not path.exists()

    worker.paused.clear()
    cairn.jobs.wait(slow.value.job_id, **QUICK)
    assert cairn.workspace.download_export(slow.value.job_id, path)["memory"] == 3

    with pytest.raises(ValueError, match="poll_interval"):
        cairn.workspace.import_(path, poll_interval=0)


def test_it_refuses_a_bad_file_with_a_typed_error_and_imports_nothing(cairn, worker, transfer_dir):
    seed(cairn)
    records = list(cairn.workspace.export(**QUICK))
    # No export header: refused by the upload itself, before any job.
    with pytest.raises(BadRequestError) as error:
        cairn.workspace.import_(
            b'{"kind": "header", "format": "something-else"}\n', scope={"tenantId": "bad"}, **QUICK
        )
    assert error.value.code == "IMPORT_FILE_INVALID" and error.value.status == 422
    assert error.value.details["line"] == 1 and "header" in error.value.message

    # A file cut short, and a bad line further on: the job fails, naming the line; nothing is imported.
    with pytest.raises(JobFailedError) as cut:
        cairn.workspace.import_(records[:-1], scope={"tenantId": "bad"}, **QUICK)
    assert (cut.value.code, cut.value.error_class) == ("IMPORT_FILE_INVALID", "validation_error")
    assert "trailer" in cut.value.message and cut.value.job.status == "failed"
    assert cut.value.kind == "workspace_import" and "IMPORT_FILE_INVALID" in str(cut.value)

    memory_line = next(i for i, r in enumerate(records) if r["kind"] == "memory")
    broken = [dict(r) for r in records]
    broken[memory_line]["type"] = "episode"
    with pytest.raises(JobFailedError) as bad_line:
        cairn.workspace.import_(broken, scope={"tenantId": "bad"}, **QUICK)
    assert bad_line.value.code == "IMPORT_FILE_INVALID"
    assert bad_line.value.details == {"line": memory_line + 1, "field": "type"}
    assert contents(cairn, "bad") == []
    assert list((transfer_dir / "uploads").iterdir()) == []  # the jobs deleted their uploads

    with pytest.raises(FileNotFoundError):
        cairn.workspace.import_("/nonexistent/ws.jsonl")


def test_it_raises_typed_errors_from_the_export(
    base_url, alice: Account, cairn, worker, transfer_dir, tmp_path
):
    with Cairn("mem_not-a-key", base_url=base_url) as stranger, pytest.raises(AuthenticationError):
        list(stranger.workspace.export(**QUICK))
    with pytest.raises(NotFoundError) as unknown:
        cairn.workspace.download_export("00000000-0000-0000-0000-000000000000", tmp_path / "x.jsonl")
    assert unknown.value.code == "JOB_NOT_FOUND"

    started = cairn.workspace.start_export()
    cairn.jobs.wait(started.job_id, **QUICK)
    for file in (transfer_dir / "exports").rglob("*.jsonl"):
        file.unlink()  # what the retention sweep does after EXPORT_RETENTION_HOURS
    with pytest.raises(BadRequestError) as expired:
        cairn.workspace.download_export(started.job_id, tmp_path / "x.jsonl")
    assert (expired.value.status, expired.value.code) == (410, "EXPORT_EXPIRED")


def test_it_never_exports_another_accounts_workspace(cairn, base_url, bob: Account, worker):
    seed(cairn)
    with Cairn(bob.key, base_url=base_url) as bobs:
        # A tenant id names a workspace of the key's owner, so bob's "copy" is his own, empty, workspace.
        records = list(bobs.workspace.export(scope={"tenantId": "copy"}, **QUICK))
        assert records[-1]["counts"].get("memory", 0) == 0
    mine = cairn.workspace.start_export()
    cairn.workspace.import_(list(cairn.workspace.export(**QUICK)), scope={"tenantId": "copy"}, **QUICK)
    with Cairn(bob.key, base_url=base_url) as bobs:
        assert (
            list(bobs.workspace.export(scope={"tenantId": "copy"}, **QUICK))[-1]["counts"].get("memory", 0)
            == 0
        )
        with pytest.raises(NotFoundError):  # alice's job id means nothing to him
            bobs.jobs.wait(mine.job_id, **QUICK)


def test_it_retries_safely_and_detects_a_cut_download(cairn, alice: Account, proxy, tmp_path, worker):
    seed(cairn)
    path = tmp_path / "ws.jsonl"
    flaky = Cairn(alice.key, base_url=proxy.url, retry=FAST)
    proxy.plan = ["503"]
    counts = flaky.workspace.export_to(path, **QUICK)
    assert counts["memory"] == 3
    export = "/api/sdk/v1/workspace/export"
    assert [(seen.path, seen.status) for seen in proxy.seen[:2]] == [(export, 503), (export, 202)]
    assert (proxy.seen[-1].path, proxy.seen[-1].status) == (f"{export}/download", 200)

    # The upload took effect but its answer was lost: the retry uploads the file again, a second job imports
    # it, and skips what the first one created.
    proxy.seen.clear()
    proxy.plan = ["lose_answer"]
    report = flaky.workspace.import_(path, scope={"tenantId": "retried"}, **QUICK)
    assert report.created == {} and report.skipped["memory"] == 3
    uploads = [seen for seen in proxy.seen if seen.path.startswith("/api/sdk/v1/workspace/import")]
    assert [seen.action for seen in uploads] == ["lose_answer", "forward"]
    assert all(int(seen.headers["Content-Length"]) == path.stat().st_size for seen in uploads)
    imports = cairn.jobs.list(kind="workspace_import", scope={"tenantId": "retried"}).jobs
    assert [job.result["created"].get("memory") for job in reversed(imports)] == [3, None]
    assert (
        cairn.workspace.export_to(tmp_path / "retried.jsonl", scope={"tenantId": "retried"}, **QUICK)
        == counts
    )

    started = flaky.workspace.start_export()
    flaky.jobs.wait(started.job_id, **QUICK)
    proxy.plan = ["cut_body"]
    with pytest.raises(APIConnectionError, match="trailer"):
        flaky.workspace.download_export(started.job_id, tmp_path / "cut.jsonl")
    assert not (tmp_path / "cut.jsonl").exists() and not (tmp_path / "cut.jsonl.part").exists()


def test_it_works_the_same_asynchronously(cairn, base_url, alice: Account, tmp_path, worker: Worker):
    seed(cairn)

    async def scenario() -> None:
        async with AsyncCairn(alice.key, base_url=base_url) as client:
            records = [record async for record in client.workspace.export(**QUICK)]
            assert records[0]["kind"] == "header" and records[-1]["counts"]["memory"] == 3
            assert ODD in [r.get("content") for r in records]

            report = await client.workspace.import_(records, scope={"tenantId": "async-copy"}, **QUICK)
            assert report.created["memory"] == 3 and report.skipped == {}
            again = await client.workspace.import_(records, scope={"tenantId": "async-copy"}, **QUICK)
            assert again.created == {} and again.skipped["memory"] == 3

            path = tmp_path / "async.jsonl"
            counts = await client.workspace.export_to(path, scope={"tenantId": "async-copy"}, **QUICK)
            assert counts == records[-1]["counts"]
            from_file = await client.with_scope(tenant_id="async-file").workspace.import_(path, **QUICK)
            assert from_file.created["memory"] == 3

            buffer = io.BytesIO()
            started = await client.workspace.start_export()
            assert (await client.jobs.wait(started.job_id, **QUICK)).status == "succeeded"
            assert await client.workspace.download_export(started.job_id, buffer) == counts
            assert buffer.getvalue().endswith(b"\n")

            with pytest.raises(BadRequestError) as error:
                await client.workspace.import_(b"not json\n", scope={"tenantId": "async-bad"}, **QUICK)
            assert error.value.code == "IMPORT_FILE_INVALID" and error.value.details["line"] == 1
            with pytest.raises(JobFailedError) as cut:
                await client.workspace.import_(records[:-1], scope={"tenantId": "async-bad"}, **QUICK)
            assert cut.value.code == "IMPORT_FILE_INVALID"

            worker.paused.set()
            with pytest.raises(JobTimeoutError):
                await client.workspace.export_to(tmp_path / "slow.jsonl", timeout=0.2, poll_interval=0.05)
            worker.paused.clear()

    asyncio.run(scenario())
    assert contents(cairn, "async-file") == sorted(["We deploy with blue-green releases on Fridays", ODD])


def test_it_offers_the_same_workspace_and_jobs_methods_sync_and_async():
    from cairn_sdk.async_client import AsyncJobs, AsyncWorkspace
    from cairn_sdk.client import Jobs, Workspace

    def public(cls: type) -> dict[str, list[str]]:
        return {
            name: list(inspect.signature(member).parameters)
            for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_")
        }

    assert public(Jobs) == public(AsyncJobs)
    assert public(Workspace) == public(AsyncWorkspace) and set(public(Workspace)) == {
        "export",
        "export_to",
        "import_",
        "start_export",
        "download_export",
        "start_import",
    }
    # The methods callers had keep their names and first arguments; the waiting is tuned by two new ones.
    assert public(Workspace)["export_to"][:3] == ["self", "path", "include_embeddings"]
    assert {"timeout", "poll_interval"} <= set(public(Workspace)["import_"])
