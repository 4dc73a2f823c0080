"""The SDK's models and the server's OpenAPI document cannot drift apart: any difference fails here."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from cairn_sdk.drift import schema_drift
from cairn_sdk.operations import OPERATIONS
from django.test import Client

pytestmark = pytest.mark.django_db(databases=[])
PREFIX = "/api/sdk/v1/"
# Served twice on purpose; the SDK calls the POST form.
NOT_IN_SDK = {("GET", "graph/status")}


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    response = Client().get("/api/sdk/v1/openapi.json")
    assert response.status_code == 200
    return response.json()


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_it_matches_the_server_for(openapi, name):
    report = schema_drift(openapi)
    operation = OPERATIONS[name]
    assert name not in report.missing, f"{operation.method} {PREFIX}{operation.path} is not served"
    assert name in report.checked
    assert name not in report.problems, "\n".join(report.problems[name])


def test_it_has_a_method_for_every_server_operation(openapi):
    served = {
        (method.upper(), path.removeprefix(PREFIX))
        for path, methods in openapi["paths"].items()
        for method in methods
    }
    in_sdk = {(operation.method, operation.path) for operation in OPERATIONS.values()}
    assert served - in_sdk - NOT_IN_SDK == set(), (
        "add these operations to cairn_sdk (operations.py and the clients)"
    )


def test_it_counts_an_operation_the_server_does_not_serve_as_drift(openapi):
    document = copy.deepcopy(openapi)
    document["paths"].pop(f"{PREFIX}memories/add")
    report = schema_drift(document)
    assert not report.ok and report.missing == ["memories.add"]
    assert "memories.add: not served by the server" in report.describe()


def test_it_reports_each_kind_of_drift(openapi):
    assert schema_drift(openapi).ok

    def drifted(change) -> str:
        document = copy.deepcopy(openapi)
        change(document["components"]["schemas"], document["paths"])
        report = schema_drift(document)
        assert not report.ok
        return report.describe()

    assert "memories.add: response 201.memory.tags: the SDK has this field" in drifted(
        lambda s, p: s["MemoryOut"]["properties"].pop("tags")
    )
    assert "memories.list: request.cursor: the SDK has this field, the server does not" in drifted(
        lambda s, p: s["ListIn"]["properties"].pop("cursor")
    )
    assert "memories.search: request.limit: required only on the server side" in drifted(
        lambda s, p: s["SearchIn"]["required"].append("limit")
    )
    assert "memories.list: response 200.count: server string, SDK integer" in drifted(
        lambda s, p: s["ListOut"]["properties"]["count"].update(type="string")
    )
    assert "memories.add: request.type: server accepts" in drifted(
        lambda s, p: s["AddIn"]["properties"]["type"]["enum"].append("episode")
    )
    assert (
        "response 200.memory.expiresAt: server string (date-time), SDK string (date-time) or null"
        in drifted(
            lambda s, p: s["MemoryOut"]["properties"].update(
                expiresAt={"type": "string", "format": "date-time"}
            )
        )
    )
    assert "context.get: request.scope.orgId: the server has this field" in drifted(
        lambda s, p: s["ScopeIn"]["properties"].update(orgId={"type": "string"})
    )
    assert "graph.rollout: query.windowHours: the SDK has this field" in drifted(
        lambda s, p: p[f"{PREFIX}graph/rollout"]["get"]["parameters"].pop()
    )
    assert "success statuses: server [200], SDK [200, 201]" in drifted(
        lambda s, p: p[f"{PREFIX}memories/add"]["post"]["responses"].pop("201")
    )
    # The JSON Lines operations: media types, the download's JSON request and the import's query.
    ndjson = "application/x-ndjson"
    assert (
        f"workspace.download_export: response 200: server answers ['application/json'], SDK reads {ndjson}"
        in drifted(
            lambda s, p: p[f"{PREFIX}workspace/export/download"]["post"]["responses"]["200"].update(
                content={"application/json": {"schema": {"type": "object"}}}
            )
        )
    )
    assert "workspace.download_export: request.id: the SDK has this field" in drifted(
        lambda s, p: s["ExportDownloadIn"]["properties"].pop("id")
    )
    assert "workspace.export: request.includeEmbeddings: the SDK has this field" in drifted(
        lambda s, p: s["ExportIn"]["properties"].pop("includeEmbeddings")
    )
    assert (
        f"workspace.import: request body: server takes ['application/json'], SDK sends {ndjson}"
        in drifted(
            lambda s, p: p[f"{PREFIX}workspace/import"]["post"].update(
                requestBody={"content": {"application/json": {"schema": {"type": "object"}}}}
            )
        )
    )
    assert "workspace.import: query.tenantId: the SDK has this field" in drifted(
        lambda s, p: p[f"{PREFIX}workspace/import"]["post"]["parameters"].pop(0)
    )
    # The routes that start a background job: a 202 with the job, checked like any envelope.
    started = drifted(lambda s, p: s["JobAcceptedOut"]["properties"].pop("jobId"))
    for name in ("workspace.export", "workspace.import", "graph.backfill"):
        assert f"{name}: response 202.jobId: the SDK has this field" in started
    assert "workspace.import: success statuses: server [200], SDK [202]" in drifted(
        lambda s, p: p[f"{PREFIX}workspace/import"]["post"]["responses"].update(
            {"200": p[f"{PREFIX}workspace/import"]["post"]["responses"].pop("202")}
        )
    )
    # graph/communities answers two models: its list (200) and, with refresh, the job it started (202).
    communities = drifted(lambda s, p: s["JobOut"]["properties"].pop("phase"))
    assert "graph.communities: response 202.job.phase: the SDK has this field" in communities
    assert "graph.communities: response 200" not in communities
    assert "graph.communities: response 200.lastRunAt: the SDK has this field" in drifted(
        lambda s, p: s["CommunitiesOut"]["properties"].pop("lastRunAt")
    )
    assert "graph.merge_entities: response 200.merges[].undoneAt: server string (date-time), SDK" in drifted(
        lambda s, p: s["MergeOut"]["properties"].update(undoneAt={"type": "string", "format": "date-time"})
    )
    assert "graph.facts: request.direction: server accepts" in drifted(
        lambda s, p: s["FactsIn"]["properties"]["direction"]["enum"].append("sideways")
    )
    assert "keys.list: response 200.keys[].lastUsedAt: server string (date-time), SDK" in drifted(
        lambda s, p: s["KeyOut"]["properties"].update(lastUsedAt={"type": "string", "format": "date-time"})
    )
    assert "keys.create: request.keyScope: server accepts" in drifted(
        lambda s, p: s["KeyCreateIn"]["properties"]["keyScope"]["enum"].append("owner")
    )


def test_it_skips_operations_the_server_does_not_offer(openapi):
    document = copy.deepcopy(openapi)
    document["paths"].pop(f"{PREFIX}memories/vacuum")
    report = schema_drift(document)
    assert "memories.vacuum" in report.missing and "memories.vacuum" not in report.checked
