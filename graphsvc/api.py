"""SDK routes of graphsvc: graph/extraction (LLM extraction state and the per-workspace token budget)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router

from config.errors import success_envelope
from config.schemas import Envelope
from graphsvc import selectors, services
from graphsvc.schemas import ExtractionOut, ExtractionQuery, ExtractionSettingsIn
from memories.api import resolve_scope
from tenancy.auth import SdkKeyAuth
from tenancy.rls import workspace_context

router = Router(tags=["graph"], auth=SdkKeyAuth())


@router.get("/graph/extraction", response=Envelope[ExtractionOut],
            summary="LLM extraction state: on/off, token budget, today's usage, entities and facts built")
def graph_extraction_get(request: HttpRequest, query: Query[ExtractionQuery]) -> dict[str, Any]:
    workspace_id, _ = resolve_scope(request, query.scope())
    with workspace_context(workspace_id):
        data = selectors.extraction_status(workspace_id=workspace_id)
    return success_envelope(request, data)


@router.patch("/graph/extraction", response=Envelope[ExtractionOut],
              summary="Set the workspace's daily LLM token budget (null: no limit)",
              description="While today's tokens are at or above the budget, extraction jobs wait (they look again "
              "every GRAPH_LLM_BUDGET_RECHECK_SECONDS); memory writes, search and context are never affected.")
def graph_extraction_patch(request: HttpRequest, payload: ExtractionSettingsIn) -> dict[str, Any]:
    workspace_id, _ = resolve_scope(request, payload.scope)
    with workspace_context(workspace_id):
        services.graph_settings_update(workspace_id=workspace_id, llm_daily_token_budget=payload.dailyTokenBudget)
        data = selectors.extraction_status(workspace_id=workspace_id)
    return success_envelope(request, data)
