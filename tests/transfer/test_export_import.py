"""Workspace export/import through the SDK API and the management commands, on real Postgres under RLS."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connections

from memories.models import Memory
from tenancy import services as tenancy_services
from tenancy.rls import workspace_context
from tests.conftest import API, SdkClient
from tests.memories.helpers import ACME_SCOPE
from tests.transfer.helpers import export_lines, import_job, import_post, import_report

TABLES = (
    "memories",
    "graph_fact_evidence",
    "graph_nodes",
    "graph_edges",
    "memory_node_links",
    "graph_entity_aliases",
    "graph_communities",
    "memory_embeddings",
)


def counts(workspace_id: int) -> dict[str, int]:
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        result = {}
        for table in TABLES:
            cursor.execute(f"SELECT count(*) FROM {table} WHERE workspace_id = %s", [workspace_id])
            result[table] = cursor.fetchone()[0]
        return result


def add_entity_graph(workspace_id: int, memory_id: str) -> None:
    """Entities, an alias, a community and a fact that superseded an older one, as entity extraction
    writes them."""
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO graph_communities (workspace_id, name, summary, fingerprint, created_at, "
            "updated_at) VALUES (%s, 'databases', 'db people', 'fp1', now(), now()) RETURNING id",
            [workspace_id],
        )
        community = cursor.fetchone()[0]
        ids = []
        for key in ("ada", "postgres"):
            cursor.execute(
                "INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, created_at, updated_at, "
                "mention_count, embedding) VALUES (%s, %s, %s, %s, now(), now(), 2, '[1,0,0]') "
                "RETURNING id",
                [workspace_id, "person" if key == "ada" else "tool", key, key.title()],
            )
            ids.append(cursor.fetchone()[0])
            cursor.execute(
                "INSERT INTO graph_community_members (workspace_id, node_id, community_id) "
                "VALUES (%s, %s, %s)",
                [workspace_id, ids[-1], community],
            )
        cursor.execute(
            "INSERT INTO graph_entity_aliases (workspace_id, node_id, alias, created_at) "
            "VALUES (%s, %s, 'ada l.', now())",
            [workspace_id, ids[0]],
        )
        edge_ids = []
        for relation, expired in (("uses", "now()"), ("prefers", "NULL")):
            cursor.execute(
                f"INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, "
                f"edge_class, weight, confidence, fact, evidence_memory_id, origin, created_at, updated_at, "
                f"expired_at, retrieval_count) VALUES (%s, %s, %s, %s, %s, 'entity', 1, 0.9, %s, %s, "
                f"'llm_entity', now(), now(), {expired}, 0) RETURNING id",
                [
                    workspace_id,
                    f"f:{ids[0]}:{ids[1]}:entity:{relation}",
                    ids[0],
                    ids[1],
                    relation,
                    f"Ada {relation} Postgres",
                    memory_id,
                ],
            )
            edge_ids.append(cursor.fetchone()[0])
            cursor.execute(
                "INSERT INTO graph_fact_evidence (workspace_id, edge_id, memory_id, user_id, evidence_text, "
                "created_at) VALUES (%s, %s, %s, NULL, 'Ada said so', now())",
                [workspace_id, edge_ids[-1], memory_id],
            )
        cursor.execute("UPDATE graph_edges SET superseded_by_id = %s WHERE id = %s", edge_ids[::-1])
        cursor.execute(
            "INSERT INTO memory_embeddings (workspace_id, memory_id, model, dimension, embedding, "
            "content_sha256, scope, created_at, updated_at) VALUES (%s, %s, 'test/3d', 3, '[0,1,0]', "
            "'sha', 'global', now(), now())",
            [workspace_id, memory_id],
        )


@pytest.fixture
def alice_graph(personas) -> dict[str, Any]:
    api = personas.alice_api
    first = api.add("Ada prefers Postgres for billing", tags=["billing"], category="db")
    second = api.add("Deploys happen on Fridays", type="rule")
    api.ok("memories/forget", {"id": second["id"]})
    workspace_id = personas.alice.personal_workspace.id
    add_entity_graph(workspace_id, first["id"])
    api.ok("graph/rollout", {"mode": "shadow"})
    return {"workspace_id": workspace_id, "first": first["id"]}


def test_it_exports_a_versioned_stream_with_every_kind(personas, alice_graph):
    lines = export_lines(personas.alice_api, includeEmbeddings=True)
    header, trailer = lines[0], lines[-1]
    assert (header["kind"], header["format"], header["version"]) == ("header", "cairn.workspace-export", 2)
    assert trailer["kind"] == "trailer"
    kinds = {line["kind"] for line in lines[1:-1]}
    assert {"memory", "embedding", "node", "edge", "link", "alias", "community", "rollout"} <= kinds
    assert "fact_evidence" in kinds
    assert sum(trailer["counts"].values()) == len(lines) - 2
    assert trailer["counts"]["memory"] == 2  # the forgotten one too, as a tombstone
    (community,) = [line for line in lines if line["kind"] == "community"]
    members = {
        line["id"] for line in lines if line["kind"] == "node" and line["communityId"] == community["id"]
    }
    assert len(members) == 2 and sorted(community["memberNodeIds"]) == sorted(members)


def test_it_imports_into_another_workspace_remapping_ids_and_twice_changes_nothing(personas, alice_graph):
    api = personas.alice_api
    lines = export_lines(api, includeEmbeddings=True)
    report = import_report(api, lines, query="?tenantId=copy")
    target = report["workspaceId"]
    assert target != alice_graph["workspace_id"]
    assert report["created"]["memory"] == 2 and report["created"]["alias"] == 1
    assert report["skipped"] == {}
    assert (
        report["embedJobsQueued"] == 0
    )  # the live memory came with its vector, the forgotten one needs none
    assert counts(target) == counts(alice_graph["workspace_id"])

    with workspace_context(target), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT id::text FROM memories WHERE workspace_id = %s AND deleted_at IS NULL", [target]
        )
        (new_memory,) = [row[0] for row in cursor.fetchall()]
        assert new_memory != alice_graph["first"]
        cursor.execute(
            "SELECT node_key FROM graph_nodes WHERE workspace_id = %s AND node_type = 'memory'", [target]
        )
        assert new_memory in {row[0] for row in cursor.fetchall()}
        cursor.execute(
            "SELECT n.node_key, n.id FROM graph_communities c "
            "JOIN graph_community_members m ON m.community_id = c.id "
            "JOIN graph_nodes n ON n.id = m.node_id WHERE c.workspace_id = %s ORDER BY n.node_key",
            [target],
        )
        members = cursor.fetchall()
        assert [key for key, _ in members] == ["ada", "postgres"]
        nodes = [node_id for _, node_id in members]
        cursor.execute(
            "SELECT e.edge_key, e.evidence_memory_id::text, s.edge_type FROM graph_edges e "
            "JOIN graph_edges s ON s.id = e.superseded_by_id WHERE e.workspace_id = %s",
            [target],
        )
        key, evidence, superseding = cursor.fetchone()
        assert evidence == new_memory and superseding == "prefers"
        assert key.startswith("f:") and key.split(":")[1] in {str(n) for n in nodes}

    again = import_report(api, lines, query="?tenantId=copy")
    assert again["created"] == {} and again["skipped"]["memory"] == 2
    assert counts(target)["graph_edges"] == counts(alice_graph["workspace_id"])["graph_edges"]


def test_it_imports_back_into_the_source_workspace_as_a_no_op(personas, alice_graph):
    before = counts(alice_graph["workspace_id"])
    report = import_report(personas.alice_api, export_lines(personas.alice_api))
    assert report["created"] == {} and report["embedJobsQueued"] == 0
    assert counts(alice_graph["workspace_id"]) == before


def test_it_queues_embedding_jobs_when_vectors_are_not_exported(personas, alice_graph):
    report = import_report(personas.alice_api, export_lines(personas.alice_api), query="?tenantId=noembed")
    assert report["embedJobsQueued"] == 1


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda lines: lines[:-1], "without its trailer"),
        (
            lambda lines: [
                *lines[:-1],
                {"kind": "link", "memoryId": "x", "nodeId": 1, "role": "self"},
                lines[-1],
            ],
            "not in this file",
        ),
        (lambda lines: [*lines[:2], {"kind": "alien"}, *lines[2:]], "unknown record kind"),
    ],
)
def test_it_refuses_bad_files_and_imports_nothing(personas, alice_graph, mutate, message):
    lines = export_lines(personas.alice_api)
    job = import_job(personas.alice_api, mutate(lines), query="?tenantId=bad")
    assert job["status"] == "failed"
    error = job["error"]
    assert error["code"] == "IMPORT_FILE_INVALID" and error["errorClass"] == "validation_error"
    assert message in error["message"] and error["details"]["line"] >= 1
    workspace = tenancy_services.workspace_for_scope(user=personas.alice, tenant_id="bad", project_id=None)
    assert set(counts(workspace.id).values()) == {0}


def test_it_refuses_a_body_that_is_no_export_at_once(personas, alice_graph, transfer_dir):
    for body, message in (
        (b"not json\n", "not valid JSON"),
        (b"\n\n", "the file is empty"),
        (b'{"kind": "header", "format": "cairn.workspace-export", "version": 99}\n', "version 99"),
    ):
        response = import_post(personas.alice_api, body)
        assert response.status_code == 422, response.content
        error = response.json()["error"]
        assert error["code"] == "IMPORT_FILE_INVALID" and message in error["message"]
        assert error["details"]["line"] == 1
    assert personas.alice_api.ok("jobs/list", {})["jobs"] == []  # no job, and no file left behind
    assert not list(transfer_dir.glob("uploads/*"))
    wrong = personas.alice_api.post("workspace/import", {"kind": "header"})
    assert wrong.status_code == 415 and wrong.json()["error"]["code"] == "UNSUPPORTED_MEDIA_TYPE"


def test_it_never_reaches_into_another_workspace(personas):
    acme_memory = personas.alice_api.add("acme secret plan", scope=ACME_SCOPE)
    # charlie asks for acme's scope: routing gives him his own workspace, never acme's rows.
    lines = export_lines(personas.charlie_api, scope=ACME_SCOPE)
    assert "acme secret plan" not in json.dumps(lines)
    # A forged file naming acme's memory id as if it came from charlie's own workspace imports as any other
    # id would: under an id derived from charlie's workspace, with acme's memory untouched and unmentioned.
    charlie_ws = personas.charlie.personal_workspace.id
    forged = [
        {"kind": "header", "format": "cairn.workspace-export", "version": 2, "sourceWorkspaceId": charlie_ws},
        {
            "kind": "memory",
            "id": acme_memory["id"],
            "content": "overwritten",
            "type": "note",
            "layer": "long_term",
            "scope": "global",
            "createdAt": "2026-01-01T00:00:00+00:00",
        },
        {"kind": "trailer", "counts": {"memory": 1}},
    ]
    job = import_job(personas.charlie_api, forged)
    assert job["status"] == "succeeded", job
    assert "acme" not in json.dumps(job) and acme_memory["id"] not in json.dumps(job)
    charlies = personas.charlie_api.ok("memories/list", {})["memories"]
    assert [m["content"] for m in charlies] == ["overwritten"] and charlies[0]["id"] != acme_memory["id"]
    with workspace_context(personas.acme.id):
        assert Memory.objects.get(pk=acme_memory["id"]).content == "acme secret plan"


def test_it_needs_a_key(anonymous_api):
    assert anonymous_api.post("workspace/export", {}).status_code == 401
    assert import_post(anonymous_api, b"").status_code == 401
    assert anonymous_api.post("workspace/export/download", {"id": "x"}).status_code == 401


def test_it_exports_and_imports_with_the_management_commands(personas, alice_graph, tmp_path):
    path = tmp_path / "export.jsonl"
    err = io.StringIO()
    call_command(
        "workspace_export",
        str(alice_graph["workspace_id"]),
        "--output",
        str(path),
        "--embeddings",
        stderr=err,
    )
    assert "workspace" in err.getvalue() and "/" in err.getvalue()  # the progress bar
    target = tenancy_services.workspace_for_scope(user=personas.alice, tenant_id="cli", project_id=None).id
    out = io.StringIO()
    call_command("workspace_import", str(target), str(path), stdout=out, stderr=io.StringIO())
    assert json.loads(out.getvalue())["created"]["memory"] == 2
    assert counts(target) == counts(alice_graph["workspace_id"])
    path.write_text('{"kind": "header", "format": "cairn.workspace-export", "version": 3}\n')
    with pytest.raises(CommandError, match="version 3 is not supported"):
        call_command("workspace_import", str(target), str(path), stdout=io.StringIO(), stderr=io.StringIO())


def test_it_carries_hygiene_and_graph_settings_and_consolidation(personas):
    """Memory hygiene travels too: importance, superseded_by with its consolidation edge, and the
    workspace's memory and graph settings."""
    api = personas.alice_api
    api.add("deploy: blue-green on Fridays")
    winner = api.add("deploy: blue-green on Tuesdays")
    consolidated = api.ok("memories/consolidate", {})
    assert consolidated["run"]["supersededCount"] == 1, consolidated
    settings_response = api.client.patch(
        f"{API}/memories/settings",
        data=json.dumps({"scrubAtRest": True, "importanceWeight": 0.3, "halfLifeDays": 12, "mmrLambda": 0.5}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    )
    assert settings_response.status_code == 200, settings_response.content
    graph_response = api.client.patch(
        f"{API}/graph/settings",
        data=json.dumps({"recallStrategy": "spreading"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api.key}",
    )
    assert graph_response.status_code == 200, graph_response.content

    lines = export_lines(api)
    kinds = {line["kind"] for line in lines}
    assert {"memory_settings", "graph_settings"} <= kinds
    target = import_report(api, lines, query="?tenantId=hygiene-copy")["workspaceId"]

    copy = SdkClient(api.client, api.key)
    scope = "?tenantId=hygiene-copy"
    memory_settings = copy.client.get(
        f"{API}/memories/settings{scope}", HTTP_AUTHORIZATION=f"Bearer {api.key}"
    )
    assert memory_settings.json()["data"]["scrubAtRest"] is True
    assert memory_settings.json()["data"]["importanceWeight"] == 0.3
    assert (memory_settings.json()["data"]["halfLifeDays"], memory_settings.json()["data"]["mmrLambda"]) == (
        12,
        0.5,
    )
    graph_settings = copy.client.get(f"{API}/graph/settings{scope}", HTTP_AUTHORIZATION=f"Bearer {api.key}")
    assert graph_settings.json()["data"]["recallStrategy"] == "spreading"
    with workspace_context(target):
        rows = {m.content: m for m in Memory.objects.filter(workspace_id=target)}
        loser, kept = rows["deploy: blue-green on Fridays"], rows["deploy: blue-green on Tuesdays"]
        assert loser.superseded_by == kept.id and kept.superseded_by is None
        assert str(kept.id) != winner["id"]  # remapped into the new workspace
        assert 0 <= kept.importance <= 1
    with workspace_context(target), connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM graph_edges WHERE workspace_id = %s AND origin = 'consolidation'", [target]
        )
        assert cursor.fetchone()[0] == 1
