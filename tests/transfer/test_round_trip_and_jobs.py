"""Export ↔ import correctness (a stable round trip, fact evidence with its end user) and the export job's
file: download, who may fetch it, retention."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from django.db import connections

from pipeline import background
from pipeline.models import BackgroundJob
from tenancy.rls import workspace_context
from tests.conftest import SdkClient
from tests.memories.helpers import ACME_SCOPE
from tests.transfer.helpers import export_lines, import_job, import_report, job_status, run_queued_jobs
from transfer import jobs

TENANT = {"tenantId": "copy"}


def _metadata_rows(workspace_id: int) -> dict[str, Any]:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT node_type || ':' || node_key, metadata FROM graph_nodes WHERE workspace_id = %s "
            "AND node_type <> 'memory' AND metadata IS NOT NULL",
            [workspace_id],
        )
        nodes = {key: json.loads(value) for key, value in cursor.fetchall()}
        cursor.execute(
            "SELECT edge_type, metadata FROM graph_edges WHERE workspace_id = %s AND metadata IS NOT NULL",
            [workspace_id],
        )
        edges = {key: json.loads(value) for key, value in cursor.fetchall()}
    return {"nodes": nodes, "edges": edges}


def _add_graph_metadata(workspace_id: int) -> None:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, metadata, created_at, "
            "updated_at, mention_count) VALUES (%s, 'tool', 'postgres', 'Postgres', "
            '\'{"aliases": ["pg"], "score": 0.5}\', now(), now(), 1), '
            "(%s, 'person', 'ada', 'Ada', '{\"role\": \"dba\"}', now(), now(), 1) RETURNING id",
            [workspace_id, workspace_id],
        )
        tool, person = (row[0] for row in cursor.fetchall())
        cursor.execute(
            "INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, "
            "edge_class, weight, confidence, origin, created_at, updated_at, retrieval_count, metadata) "
            "VALUES (%s, %s, %s, %s, 'uses', 'entity', 1, 0.8, 'llm_entity', now(), now(), 0, "
            '\'{"source": {"kind": "chat"}}\')',
            [workspace_id, f"f:{person}:{tool}:entity:uses", person, tool],
        )


def test_it_round_trips_graph_metadata_without_wrapping_it_again(personas):
    api = personas.alice_api
    api.add("Ada runs Postgres")
    source = personas.alice.personal_workspace.id
    _add_graph_metadata(source)
    first = import_report(api, export_lines(api), query="?tenantId=copy")["workspaceId"]
    copy_api = SdkClient(api.client, api.key)
    second = import_report(copy_api, export_lines(copy_api, scope=TENANT), query="?tenantId=copy2")
    assert _metadata_rows(source) == _metadata_rows(first) == _metadata_rows(second["workspaceId"])
    assert _metadata_rows(source)["nodes"]["tool:postgres"] == {"aliases": ["pg"], "score": 0.5}
    assert _metadata_rows(source)["edges"]["uses"] == {"source": {"kind": "chat"}}


def test_it_carries_fact_evidence_with_the_end_user_of_the_imported_memory(personas):
    api = personas.alice_api
    private = api.add("Ada prefers Postgres", scope={"userId": "u-ada"})
    shared = api.add("The team runs Postgres")
    source = personas.alice.personal_workspace.id
    _add_graph_metadata(source)
    with workspace_context(source), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT id FROM graph_edges WHERE workspace_id = %s AND origin = 'llm_entity'", [source]
        )
        (edge,) = cursor.fetchone()
        for memory, user in ((private["id"], "u-ada"), (shared["id"], None)):
            cursor.execute(
                "INSERT INTO graph_fact_evidence (workspace_id, edge_id, memory_id, user_id, evidence_text, "
                "created_at) VALUES (%s, %s, %s, %s, 'said so', now())",
                [source, edge, memory, user],
            )
    lines = export_lines(api)
    evidence = [line for line in lines if line["kind"] == "fact_evidence"]
    assert {line["memoryId"] for line in evidence} == {private["id"], shared["id"]}
    assert all("userId" not in line for line in evidence)  # the importer reads it from the memory
    # A forged file cannot give the private memory's evidence to everyone: the user comes from the memory.
    for line in lines:
        if line["kind"] == "memory" and line["id"] == private["id"]:
            assert line["userId"] == "u-ada"
    target = import_report(api, lines, query="?tenantId=copy")["workspaceId"]
    with workspace_context(target), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT m.content, fe.user_id, e.edge_type FROM graph_fact_evidence fe "
            "JOIN memories m ON m.id = fe.memory_id JOIN graph_edges e ON e.id = fe.edge_id "
            "WHERE fe.workspace_id = %s ORDER BY m.content",
            [target],
        )
        assert cursor.fetchall() == [
            ("Ada prefers Postgres", "u-ada", "uses"),
            ("The team runs Postgres", None, "uses"),
        ]
    again = import_report(api, lines, query="?tenantId=copy")
    assert again["created"] == {} and again["skipped"]["fact_evidence"] == 2


def test_it_gives_a_version_1_file_its_facts_evidence(personas):
    api = personas.alice_api
    memory = api.add("Ada uses Postgres", scope={"userId": "u-ada"})
    source = personas.alice.personal_workspace.id
    _add_graph_metadata(source)
    with workspace_context(source), connections["app"].cursor() as cursor:
        cursor.execute(
            "UPDATE graph_edges SET evidence_memory_id = %s "
            "WHERE workspace_id = %s AND origin = 'llm_entity'",
            [memory["id"], source],
        )
    lines = [line for line in export_lines(api) if line["kind"] != "fact_evidence"]
    lines[0]["version"] = 1
    lines[-1]["counts"].pop("fact_evidence", None)
    target = import_report(api, lines, query="?tenantId=old")["workspaceId"]
    with workspace_context(target), connections["app"].cursor() as cursor:
        cursor.execute("SELECT user_id FROM graph_fact_evidence WHERE workspace_id = %s", [target])
        assert cursor.fetchall() == [("u-ada",)]


def _export_job(api: SdkClient, scope: dict[str, Any]) -> str:
    response = api.post("workspace/export", {"scope": scope})
    assert response.status_code == 202, response.content
    return response.json()["data"]["jobId"]


def test_it_lets_only_admins_of_the_workspace_fetch_a_finished_export(personas):
    alice, bob, charlie = personas.alice_api, personas.bob_api, personas.charlie_api
    alice.add("acme deploy plan", scope=ACME_SCOPE)
    job_id = _export_job(alice, ACME_SCOPE)
    body = {"id": job_id, "scope": ACME_SCOPE}
    alice.error("workspace/export/download", body, status=409, code="EXPORT_NOT_READY")
    run_queued_jobs()
    status = job_status(alice, job_id, ACME_SCOPE)
    assert status["status"] == "succeeded" and status["done"] == status["result"]["lines"]
    # bob is a member (write): the export is admin's; charlie's scope lands in his own workspace.
    error = bob.error("workspace/export/download", body, status=403, code="FORBIDDEN_ROLE")
    assert error["details"]["requiredRole"] == "admin"
    bob.error("workspace/export", {"scope": ACME_SCOPE}, status=403, code="FORBIDDEN_ROLE")
    charlie.error("workspace/export/download", body, status=404, code="JOB_NOT_FOUND")
    downloaded = alice.post("workspace/export/download", body)
    content = b"".join(downloaded.streaming_content)
    assert b"acme deploy plan" in content and b"acme deploy plan" not in _charlie_export(charlie)


def _charlie_export(charlie: SdkClient) -> bytes:
    return b"".join(json.dumps(line).encode() for line in export_lines(charlie, scope=ACME_SCOPE))


def test_it_deletes_exports_after_their_retention_and_then_answers_410(personas, settings, transfer_dir):
    api = personas.alice_api
    api.add("deploy plan")
    job_id = _export_job(api, {})
    run_queued_jobs()
    path = jobs.export_path(workspace_id=personas.alice.personal_workspace.id, job_id=job_id)
    assert path.is_file()
    stray = transfer_dir / "uploads" / "0f3c1e5b-8d1a-4f57-9a40-5d1b6f0e2c11.jsonl"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"{}\n")
    assert background.jobs_sweep() == 0  # younger than EXPORT_RETENTION_HOURS
    old = time.time() - settings.EXPORT_RETENTION_HOURS * 3600 - 60
    for file in (path, stray):
        os.utime(file, (old, old))
    assert background.jobs_sweep() == 2
    api.error("workspace/export/download", {"id": job_id}, status=410, code="EXPORT_EXPIRED")


def test_it_fails_an_export_job_whose_workspace_cannot_be_read_without_leaving_a_partial_file(
    personas, transfer_dir
):
    api = personas.alice_api
    workspace_id = personas.alice.personal_workspace.id
    job = background.job_create(workspace_id=workspace_id, kind=jobs.EXPORT_KIND, params={})
    with workspace_context(workspace_id):
        BackgroundJob.objects.filter(pk=job.id).update(params={"includeEmbeddings": True})
    (transfer_dir / "exports" / str(workspace_id)).mkdir(parents=True)
    (transfer_dir / "exports" / str(workspace_id) / f"{job.id}.jsonl.part").mkdir()  # cannot be written
    run_queued_jobs()
    status = job_status(api, str(job.id))
    assert status["status"] == "failed" and status["error"]["code"] == "JOB_FAILED"
    assert status["error"]["message"] is None
    assert not jobs.export_path(workspace_id=workspace_id, job_id=job.id).exists()


def _entity_confidence_and_centroid(workspace_id: int) -> tuple[Any, ...]:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT confidence FROM graph_nodes WHERE workspace_id = %s AND node_key = 'postgres'",
            [workspace_id],
        )
        (confidence,) = cursor.fetchone()
        cursor.execute(
            "SELECT centroid::text, centroid_model FROM graph_communities WHERE workspace_id = %s",
            [workspace_id],
        )
        return (confidence, *cursor.fetchone())


def test_it_carries_entity_confidence_and_community_centroids(personas):
    api = personas.alice_api
    api.add("Ada runs Postgres")
    source = personas.alice.personal_workspace.id
    _add_graph_metadata(source)
    with workspace_context(source), connections["app"].cursor() as cursor:
        cursor.execute(
            "UPDATE graph_nodes SET confidence = 0.42 WHERE workspace_id = %s AND node_key = 'postgres'",
            [source],
        )
        cursor.execute(
            "INSERT INTO graph_communities (workspace_id, name, summary, fingerprint, centroid, "
            "centroid_model, created_at, updated_at) VALUES (%s, 'databases', 'Who runs what.', 'f1', "
            "'[0.6,0.8]', 'local/test', now(), now())",
            [source],
        )
    lines = export_lines(api, includeEmbeddings=True)
    (community,) = [line for line in lines if line["kind"] == "community"]
    assert (community["centroid"], community["centroidModel"]) == ([0.6, 0.8], "local/test")
    target = import_report(api, lines, query="?tenantId=copy")["workspaceId"]
    assert _entity_confidence_and_centroid(target) == (0.42, "[0.6,0.8]", "local/test")
    # Without embeddings the centroid stays home (as vectors do); the confidence travels.
    plain = [line for line in export_lines(api) if line["kind"] in ("community", "node")]
    assert all(line.get("centroid") is None for line in plain if line["kind"] == "community")
    assert {line["confidence"] for line in plain if line.get("nodeKey") == "postgres"} == {0.42}


def test_it_refuses_a_community_centroid_without_its_model(personas):
    api = personas.alice_api
    api.add("Ada runs Postgres")
    _add_graph_metadata(personas.alice.personal_workspace.id)
    lines = export_lines(api, includeEmbeddings=True)
    lines.insert(
        1,
        {
            "kind": "community",
            "id": 999,
            "name": "x",
            "summary": "",
            "fingerprint": "f",
            "memberNodeIds": [],
            "centroid": [1.0, 0.0],
        },
    )
    job = import_job(api, lines, query="?tenantId=copy")
    assert job["status"] == "failed"
    error = job["error"]
    assert error["code"] == "IMPORT_FILE_INVALID" and error["details"]["field"] == "centroidModel"


def test_it_carries_sessions_their_turns_and_skill_files(personas):
    api = personas.alice_api
    session_id = api.ok("sessions/start", {"title": "Carried"}, status=201)["sessionId"]
    for content, speaker in (("Who rotates the keys?", "Dana"), ("Lee does, every quarter.", "Lee")):
        api.ok(
            "sessions/checkpoint",
            {
                "sessionId": session_id,
                "content": content,
                "speaker": speaker,
                "saidAt": "2024-02-01T10:00:00Z",
            },
            status=201,
        )
    api.ok("sessions/end", {"sessionId": session_id})
    api.ok("skills/files/upsert", {"path": "skills/keys.md", "content": "# Keys\n"}, status=201)
    lines = export_lines(api)
    kinds = [line["kind"] for line in lines]
    assert kinds.count("session") == 1 and kinds.count("skill_file") == 1
    turns = [line for line in lines if line["kind"] == "memory" and line["conversation"]]
    assert sorted((t["conversation"]["kind"], t["conversation"]["turnIndex"]) for t in turns) == sorted(
        [("message", 0), ("message", 1), ("summary", None)]
    )

    report = import_report(api, lines, query="?tenantId=copy")
    assert report["created"]["session"] == 1 and report["created"]["skill_file"] == 1
    # The copy is a session like the first: its transcript holds both turns, in order, with their speakers.
    copied = api.ok("memories/search", {"query": "rotates keys", "strategy": "lexical", "scope": TENANT})
    conversation = copied["memories"][0]["conversation"]
    assert conversation["sessionId"] != session_id and conversation["speaker"] in {"Dana", "Lee"}
    snapshot = api.client.get(
        f"/api/sdk/v1/sessions/{conversation['sessionId']}/snapshot?tenantId=copy",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    ).json()["data"]["snapshot"]
    assert snapshot["messageCount"] == 2
    assert snapshot["transcriptMd"].index("Who rotates") < snapshot["transcriptMd"].index("every quarter")
    assert api.ok("skills/files/list", {"scope": TENANT})["count"] == 1
    # Twice changes nothing.
    again = import_report(api, lines, query="?tenantId=copy")
    assert again["created"].get("session", 0) == 0 and again["skipped"]["session"] == 1
