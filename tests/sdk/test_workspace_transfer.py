"""cairn_sdk's workspace export/import against a live server: streamed JSON Lines out, a file back in."""

from __future__ import annotations

import asyncio
import inspect
import json

import pytest
from cairn_sdk import APIConnectionError, AsyncCairn, AuthenticationError, BadRequestError, Cairn, models

from tests.sdk.conftest import LIVE, Account
from tests.sdk.test_retries import FAST

pytestmark = LIVE
# Characters the server writes unescaped inside JSON strings, and that str.splitlines would cut a line at.
ODD = "line\u2028separator, next\u0085line, carriage\rreturn"


def seed(cairn: Cairn) -> None:
    cairn.memories.add("We deploy with blue-green releases on Fridays", tags=["deploy"])
    cairn.memories.add(ODD, type="fact")
    forgotten = cairn.memories.add("an old idea")
    cairn.memories.forget(forgotten.id)  # tombstones travel too


def contents(cairn: Cairn, tenant: str) -> list[str]:
    return sorted(memory.content for memory in cairn.with_scope(tenant_id=tenant).memories.iter())


def test_it_exports_and_imports_into_another_tenant_and_twice_changes_nothing(cairn):
    seed(cairn)
    records = list(cairn.workspace.export())
    assert records[0]["kind"] == "header" and records[0]["format"] == "cairn.workspace-export"
    assert records[-1]["kind"] == "trailer"
    counts = records[-1]["counts"]
    assert counts["memory"] == 3 and not any(r["kind"] == "embedding" for r in records)
    assert ODD in [r.get("content") for r in records]  # one line, not cut at U+2028

    report = cairn.workspace.import_(records, scope={"tenantId": "copy"})
    assert isinstance(report, models.ImportReport)
    assert report.created["memory"] == 3 and report.skipped == {}
    assert report.embed_jobs_queued == 2  # the live memories came without vectors; the tombstone needs none
    copied = list(cairn.workspace.export(scope={"tenantId": "copy"}))
    assert copied[-1]["counts"] == counts
    assert contents(cairn, "copy") == sorted(["We deploy with blue-green releases on Fridays", ODD])

    again = cairn.workspace.import_(cairn.workspace.export(), scope={"tenantId": "copy"})  # streamed across
    assert again.created == {} and again.skipped["memory"] == 3 and again.workspace_id == report.workspace_id
    assert list(cairn.workspace.export(scope={"tenantId": "copy"}))[-1]["counts"] == counts


def test_it_writes_the_export_to_a_file_and_imports_the_file(cairn, alice, tmp_path):
    seed(cairn)
    path = tmp_path / "ws.jsonl"
    counts = cairn.workspace.export_to(path, include_embeddings=True)
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and json.loads(lines[0])["includesEmbeddings"] is True
    assert json.loads(lines[-2]) == {"kind": "trailer", "counts": counts}

    tenant = cairn.with_scope(tenant_id="from-file")  # the default scope travels as ?tenantId=
    report = tenant.workspace.import_(path)
    assert report.created["memory"] == 3 and report.workspace_id != alice.workspace().id
    assert tenant.workspace.import_(path.read_bytes()).created == {}


def test_it_refuses_a_bad_file_with_a_typed_error_and_imports_nothing(cairn):
    seed(cairn)
    records = list(cairn.workspace.export())
    with pytest.raises(BadRequestError) as error:
        cairn.workspace.import_(
            b'{"kind": "header", "format": "something-else"}\n', scope={"tenantId": "bad"}
        )
    assert error.value.code == "IMPORT_FILE_INVALID" and error.value.status == 422
    assert error.value.details["line"] == 1 and "header" in error.value.message

    with pytest.raises(BadRequestError) as cut:
        cairn.workspace.import_(records[:-1], scope={"tenantId": "bad"})  # no trailer: cut short
    assert cut.value.code == "IMPORT_FILE_INVALID" and "trailer" in cut.value.message
    assert contents(cairn, "bad") == []

    with pytest.raises(FileNotFoundError):
        cairn.workspace.import_("/nonexistent/ws.jsonl")


def test_it_raises_typed_errors_from_the_export_stream(base_url, alice: Account):
    with Cairn("mem_not-a-key", base_url=base_url) as stranger, pytest.raises(AuthenticationError):
        list(stranger.workspace.export())


def test_it_never_exports_another_accounts_workspace(cairn, base_url, bob: Account):
    seed(cairn)
    with Cairn(bob.key, base_url=base_url) as bobs:
        # A tenant id names a workspace of the key's owner, so bob's "copy" is his own, empty, workspace.
        records = list(bobs.workspace.export(scope={"tenantId": "copy"}))
        assert records[-1]["counts"].get("memory", 0) == 0
    cairn.workspace.import_(list(cairn.workspace.export()), scope={"tenantId": "copy"})
    with Cairn(bob.key, base_url=base_url) as bobs:
        assert list(bobs.workspace.export(scope={"tenantId": "copy"}))[-1]["counts"].get("memory", 0) == 0


def test_it_retries_safely_and_detects_a_cut_stream(cairn, alice: Account, proxy, tmp_path):
    seed(cairn)
    path = tmp_path / "ws.jsonl"
    flaky = Cairn(alice.key, base_url=proxy.url, retry=FAST)
    proxy.plan = ["503"]
    counts = flaky.workspace.export_to(path)
    assert counts["memory"] == 3 and [seen.status for seen in proxy.seen] == [503, 200]

    # The import took effect but its answer was lost: the retry sends the file again and creates nothing new.
    proxy.plan = ["lose_answer"]
    report = flaky.workspace.import_(path, scope={"tenantId": "retried"})
    assert report.created == {} and report.skipped["memory"] == 3
    assert [seen.action for seen in proxy.seen[-2:]] == ["lose_answer", "forward"]
    assert all(int(seen.headers["Content-Length"]) == path.stat().st_size for seen in proxy.seen[-2:])
    assert cairn.workspace.export_to(tmp_path / "retried.jsonl", scope={"tenantId": "retried"}) == counts

    proxy.plan = ["cut_body"]
    with pytest.raises(APIConnectionError, match="trailer"):
        flaky.workspace.export_to(tmp_path / "cut.jsonl")
    assert not (tmp_path / "cut.jsonl").exists() and not (tmp_path / "cut.jsonl.part").exists()


def test_it_works_the_same_asynchronously(cairn, base_url, alice: Account, tmp_path):
    seed(cairn)

    async def scenario() -> None:
        async with AsyncCairn(alice.key, base_url=base_url) as client:
            records = [record async for record in client.workspace.export()]
            assert records[0]["kind"] == "header" and records[-1]["counts"]["memory"] == 3
            assert ODD in [r.get("content") for r in records]

            report = await client.workspace.import_(records, scope={"tenantId": "async-copy"})
            assert report.created["memory"] == 3 and report.skipped == {}
            again = await client.workspace.import_(records, scope={"tenantId": "async-copy"})
            assert again.created == {} and again.skipped["memory"] == 3

            path = tmp_path / "async.jsonl"
            counts = await client.workspace.export_to(path, scope={"tenantId": "async-copy"})
            assert counts == records[-1]["counts"]
            from_file = await client.with_scope(tenant_id="async-file").workspace.import_(path)
            assert from_file.created["memory"] == 3

            with pytest.raises(BadRequestError) as error:
                await client.workspace.import_(b"not json\n", scope={"tenantId": "async-bad"})
            assert error.value.code == "IMPORT_FILE_INVALID" and error.value.details["line"] == 1

    asyncio.run(scenario())
    assert contents(cairn, "async-file") == sorted(["We deploy with blue-green releases on Fridays", ODD])


def test_it_offers_the_same_workspace_methods_sync_and_async():
    from cairn_sdk.async_client import AsyncWorkspace
    from cairn_sdk.client import Workspace

    def public(cls: type) -> dict[str, list[str]]:
        return {
            name: list(inspect.signature(member).parameters)
            for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_")
        }

    assert public(Workspace) == public(AsyncWorkspace) and set(public(Workspace)) == {
        "export",
        "export_to",
        "import_",
    }
