"""SDK routes of transfer: workspace export (a JSON Lines stream) and import (the same format, all or
nothing)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, StreamingHttpResponse
from ninja import Query, Router

from config.errors import ApiError, success_envelope
from config.schemas import Envelope
from tenancy.access import request_workspace_id
from tenancy.auth import SdkKeyAuth
from tenancy.policy import ADMIN, requires
from transfer import export, services
from transfer.schemas import ExportIn, ImportOut, ImportQuery

router = Router(tags=["workspace"], auth=SdkKeyAuth())

NDJSON = "application/x-ndjson"


@router.post(
    "/workspace/export",
    response={200: None},
    summary="Export the workspace as versioned JSON Lines (streamed)",
    description="Streams the workspace — memories, optional vectors, graph nodes, edges, memory links, "
    "entity aliases, communities, rollout, graph and memory settings — as one JSON object per line: a header "
    "(format, version) first, a trailer with per-kind counts last. Import it with workspace/import or "
    "`manage.py workspace_import`.",
    openapi_extra={
        "responses": {200: {"description": "JSON Lines", "content": {NDJSON: {"schema": {"type": "string"}}}}}
    },
)
@requires(ADMIN)
def workspace_export(request: HttpRequest, payload: ExportIn) -> StreamingHttpResponse:
    workspace_id = request_workspace_id(request, payload.scope)
    response = StreamingHttpResponse(
        export.workspace_export_lines(
            workspace_id=workspace_id, include_embeddings=payload.includeEmbeddings
        ),
        content_type=NDJSON,
    )
    response["Content-Disposition"] = f'attachment; filename="cairn-workspace-{workspace_id}.jsonl"'
    return response


@router.post(
    "/workspace/import",
    response=Envelope[ImportOut],
    summary="Import a workspace export (JSON Lines body) into the scope's workspace",
    description="Send the file as the body with Content-Type application/x-ndjson, up to "
    "EXPORT_IMPORT_MAX_UPLOAD_BYTES (50 MB; use `manage.py workspace_import` for more). Ids are remapped, "
    "rows that exist are skipped (importing twice changes nothing), and a bad line fails the whole import "
    "with 422 IMPORT_FILE_INVALID naming the line; nothing is half-imported.",
    openapi_extra={"requestBody": {"required": True, "content": {NDJSON: {"schema": {"type": "string"}}}}},
)
@requires(ADMIN)
def workspace_import(request: HttpRequest, query: Query[ImportQuery]) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, query.scope())
    if request.content_type != NDJSON:
        raise ApiError(415, "UNSUPPORTED_MEDIA_TYPE", f"Send the export file with Content-Type: {NDJSON}.")
    # Read line by line from the request stream: the file may be larger than the API's in-memory body limit.
    report = services.workspace_import(workspace_id=workspace_id, lines=iter(request.readline, b""))
    return success_envelope(request, {"workspaceId": workspace_id, **report.as_dict()})
