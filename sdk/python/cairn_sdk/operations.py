"""Every SDK API operation the client calls, with its request and response model.

One table serves the clients (which path and model a method uses) and the drift check (which OpenAPI operation
a model must match), so a method cannot quietly talk to an endpoint its models were never checked against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel

from cairn_sdk import models as m


@dataclass(frozen=True)
class Operation:
    name: str
    method: str
    path: str  # relative to /api/sdk/v1
    request: type[m.RequestModel] | None
    response: type[BaseModel]
    query_params: bool = (
        False  # the request model travels as the query string (GET, or beside an NDJSON body)
    )
    success_status: tuple[int, ...] = (200,)
    # Workspace export download and import move a JSON Lines file: the download answers one instead of the
    # envelope, import sends one as the body. The drift check then compares the media types, as there is no
    # JSON schema to compare.
    request_body: Literal["json", "ndjson"] = "json"
    response_body: Literal["envelope", "ndjson"] = "envelope"
    # Success statuses whose envelope carries another model than `response`: graph/communities answers its
    # list (200) or, with refresh, the job it started (202).
    responses: Mapping[int, type[BaseModel]] = field(default_factory=dict)

    def response_for(self, status: int) -> type[BaseModel]:
        return self.responses.get(status, self.response)


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation("health", "GET", "health", None, m.Health),
        Operation(
            "memories.add", "POST", "memories/add", m.AddRequest, m.AddResult, success_status=(201, 200)
        ),
        Operation("memories.search", "POST", "memories/search", m.SearchRequest, m.SearchResult),
        Operation("memories.list", "POST", "memories/list", m.ListRequest, m.ListResult),
        Operation("memories.edit", "POST", "memories/edit", m.EditRequest, m.EditResult),
        Operation("memories.forget", "POST", "memories/forget", m.ForgetRequest, m.ForgetResult),
        Operation("memories.resolve", "POST", "memories/resolve", m.ResolveRequest, m.ResolveResult),
        Operation("memories.decisions", "POST", "memories/decisions", m.DecisionsRequest, m.DecisionsResult),
        Operation(
            "memories.bulk_forget", "POST", "memories/bulk-forget", m.BulkForgetRequest, m.BulkForgetResult
        ),
        Operation("memories.vacuum", "POST", "memories/vacuum", m.VacuumRequest, m.VacuumResult),
        Operation(
            "memories.consolidate", "POST", "memories/consolidate", m.ConsolidateRequest, m.ConsolidateResult
        ),
        Operation(
            "memories.settings",
            "GET",
            "memories/settings",
            m.MemorySettingsQuery,
            m.MemorySettings,
            query_params=True,
        ),
        Operation(
            "memories.update_settings",
            "PATCH",
            "memories/settings",
            m.MemorySettingsRequest,
            m.MemorySettings,
        ),
        Operation("context.get", "POST", "context/get", m.ContextRequest, m.ContextResult),
        Operation("graph.trace", "POST", "graph/trace", m.TraceRequest, m.TraceResult),
        Operation("graph.status", "POST", "graph/status", m.StatusRequest, m.StatusResult),
        Operation(
            "graph.rollout", "GET", "graph/rollout", m.RolloutQuery, m.RolloutResult, query_params=True
        ),
        Operation("graph.set_rollout", "POST", "graph/rollout", m.RolloutSetRequest, m.RolloutResult),
        Operation("graph.update_rollout", "PATCH", "graph/rollout", m.RolloutPatchRequest, m.RolloutResult),
        Operation(
            "graph.extraction",
            "GET",
            "graph/extraction",
            m.ExtractionQuery,
            m.ExtractionState,
            query_params=True,
        ),
        Operation(
            "graph.update_extraction",
            "PATCH",
            "graph/extraction",
            m.ExtractionSettingsRequest,
            m.ExtractionState,
        ),
        Operation("graph.facts", "POST", "graph/facts", m.FactsRequest, m.FactsResult),
        Operation("graph.traverse", "POST", "graph/traverse", m.TraverseRequest, m.TraverseResult),
        Operation("graph.entities", "POST", "graph/entities", m.EntitiesRequest, m.EntitiesResult),
        Operation(
            "graph.merge_entities", "POST", "graph/entities/merge", m.EntityMergeRequest, m.EntityMergeResult
        ),
        Operation(
            "graph.split_entity", "POST", "graph/entities/split", m.EntitySplitRequest, m.EntitySplitResult
        ),
        Operation(
            "graph.communities",
            "POST",
            "graph/communities",
            m.CommunitiesRequest,
            m.CommunitiesResult,
            success_status=(200, 202),
            responses={202: m.JobAccepted},
        ),
        Operation(
            "graph.backfill",
            "POST",
            "graph/backfill",
            m.BackfillRequest,
            m.JobAccepted,
            success_status=(202,),
        ),
        Operation("graph.stats", "POST", "graph/stats", m.ScopedRequest, m.GraphStats),
        Operation("graph.clear", "POST", "graph/clear", m.ClearRequest, m.ClearResult),
        Operation("graph.decay", "POST", "graph/decay", m.DecayRequest, m.DecayResult),
        Operation(
            "graph.settings",
            "GET",
            "graph/settings",
            m.GraphSettingsQuery,
            m.GraphSettings,
            query_params=True,
        ),
        Operation(
            "graph.update_settings", "PATCH", "graph/settings", m.GraphSettingsRequest, m.GraphSettings
        ),
        Operation(
            "workspace.export",
            "POST",
            "workspace/export",
            m.ExportRequest,
            m.JobAccepted,
            success_status=(202,),
        ),
        Operation(
            "workspace.download_export",
            "POST",
            "workspace/export/download",
            m.ExportDownloadRequest,
            m.ExportRecord,
            response_body="ndjson",
        ),
        Operation(
            "workspace.import",
            "POST",
            "workspace/import",
            m.ImportQuery,
            m.JobAccepted,
            query_params=True,
            success_status=(202,),
            request_body="ndjson",
        ),
        Operation(
            "keys.create", "POST", "keys/create", m.KeyCreateRequest, m.KeyCreateResult, success_status=(201,)
        ),
        Operation("keys.list", "POST", "keys/list", m.KeyListRequest, m.KeyListResult),
        Operation("keys.revoke", "POST", "keys/revoke", m.KeyRevokeRequest, m.KeyRevokeResult),
        Operation("jobs.status", "POST", "jobs/status", m.JobStatusRequest, m.Job),
        Operation("jobs.list", "POST", "jobs/list", m.JobListRequest, m.JobListResult),
        Operation(
            "sessions.start",
            "POST",
            "sessions/start",
            m.SessionStartRequest,
            m.SessionStartResult,
            success_status=(201,),
        ),
        Operation(
            "sessions.checkpoint",
            "POST",
            "sessions/checkpoint",
            m.CheckpointRequest,
            m.CheckpointResult,
            success_status=(201, 200),
        ),
        Operation(
            "sessions.turns",
            "POST",
            "sessions/turns",
            m.TurnsRequest,
            m.TurnsResult,
            success_status=(201, 200),
        ),
        Operation("sessions.end", "POST", "sessions/end", m.SessionEndRequest, m.SessionEndResult),
        Operation(
            "sessions.snapshot",
            "GET",
            "sessions/{session_id}/snapshot",
            m.SnapshotQuery,
            m.SnapshotResult,
            query_params=True,
        ),
        Operation(
            "skills.upsert",
            "POST",
            "skills/files/upsert",
            m.SkillUpsertRequest,
            m.SkillUpsertResult,
            success_status=(201, 200),
        ),
        Operation("skills.list", "POST", "skills/files/list", m.SkillListRequest, m.SkillListResult),
        Operation("skills.delete", "POST", "skills/files/delete", m.SkillDeleteRequest, m.SkillDeleteResult),
        Operation(
            "skills.promote",
            "POST",
            "skills/files/promote",
            m.SkillPromoteRequest,
            m.SkillPromoteResult,
            success_status=(201, 200),
        ),
    )
}
