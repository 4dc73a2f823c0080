"""What LLM extraction learnt: entities (with merge and split when graphsvc offers them), facts and
communities."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from pydantic import ValidationError

from config.errors import ApiError
from dashboard import selectors
from dashboard.access import SignedInRequest, workspace_page
from dashboard.views.common import LIST_LIMIT, confirmation_page, confirmed, int_or_zero, page
from graphsvc import llm
from graphsvc import selectors as graph_selectors
from graphsvc import services as graph_services
from graphsvc.models import ENTITY_TYPES
from graphsvc.schemas import EntitySplitIn
from pipeline import graph_jobs
from pipeline import selectors as pipeline_selectors
from tenancy import policy
from tenancy.models import Workspace
from tenancy.rls import workspace_context

FACT_LIMIT = 200


def _llm_configured() -> bool:
    # graphsvc's own answer (per-task models count), so the empty states never name a setting that is set.
    return llm.llm_enabled()


@workspace_page(policy.READ)
@require_GET
def entities(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    query = request.GET.get("q", "").strip()[:200]
    raw_type = request.GET.get("type", "")
    entity_type = raw_type if raw_type in ENTITY_TYPES else None
    with workspace_context(workspace.id):
        rows = selectors.entity_list(
            workspace_id=workspace.id, query=query, entity_type=entity_type, limit=LIST_LIMIT
        )
        memories = selectors.memory_total(workspace_id=workspace.id)
    return page(
        request,
        "dashboard/entities.html",
        workspace,
        role,
        {
            "rows": rows,
            "q": query,
            "type": entity_type or "",
            "types": ENTITY_TYPES,
            "llm_configured": _llm_configured(),
            "memory_total": memories,
        },
        section="entities",
    )


@workspace_page(policy.READ)
@require_GET
def entity_detail(request: SignedInRequest, workspace: Workspace, role: str, node_id: int) -> HttpResponse:
    include_invalid = request.GET.get("all") == "1"
    with workspace_context(workspace.id):
        entity = selectors.entity_get(workspace_id=workspace.id, node_id=node_id)
        if entity is None:
            raise Http404("No such entity")
        aliases = selectors.entity_aliases(workspace_id=workspace.id, node=entity, limit=LIST_LIMIT)
        facts = selectors.fact_list(
            workspace_id=workspace.id, node=entity, include_invalid=include_invalid, limit=FACT_LIMIT
        )
        selectors.facts_mark(workspace_id=workspace.id, facts=facts)
        merges = graph_selectors.entity_merges(workspace_id=workspace.id, node_id=entity.id, limit=LIST_LIMIT)
        others = [
            e
            for e in selectors.entity_list(
                workspace_id=workspace.id, query="", entity_type=None, limit=LIST_LIMIT
            )
            if e.id != entity.id
        ]
    return page(
        request,
        "dashboard/entity_detail.html",
        workspace,
        role,
        {
            "entity": entity,
            "aliases": aliases,
            "facts": facts,
            "include_invalid": include_invalid,
            "merges": merges,
            "others": others,
            "types": ENTITY_TYPES,
        },
        section="entities",
    )


@workspace_page(policy.READ)
@require_GET
def facts(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    query = request.GET.get("q", "").strip()[:200]
    include_invalid = request.GET.get("all") == "1"
    with workspace_context(workspace.id):
        rows = selectors.fact_list(
            workspace_id=workspace.id, query=query, include_invalid=include_invalid, limit=FACT_LIMIT
        )
        selectors.facts_mark(workspace_id=workspace.id, facts=rows)
    return page(
        request,
        "dashboard/facts.html",
        workspace,
        role,
        {
            "facts": rows,
            "q": query,
            "include_invalid": include_invalid,
            "llm_configured": _llm_configured(),
        },
        section="facts",
    )


@workspace_page(policy.READ)
@require_GET
def communities(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    with workspace_context(workspace.id):
        rows = selectors.community_list(workspace_id=workspace.id, limit=LIST_LIMIT, member_limit=20)
        jobs = pipeline_selectors.jobs_list(
            workspace_id=workspace.id, kind=graph_jobs.COMMUNITIES_REFRESH_KIND, limit=1
        )
    return page(
        request,
        "dashboard/communities.html",
        workspace,
        role,
        {"rows": rows, "llm_configured": _llm_configured(), "job": jobs[0] if jobs else None},
        section="communities",
    )


@workspace_page(policy.ADMIN)
@require_POST
def communities_refresh(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """Recompute the communities and their summaries in a background job (the SDK's graph/communities with
    refresh): a refresh already queued or running is reused."""
    with workspace_context(workspace.id):
        job = graph_jobs.graph_job_start(
            workspace_id=workspace.id,
            kind=graph_jobs.COMMUNITIES_REFRESH_KIND,
            created_by=f"dashboard:{request.user.get_username()}",
        )
    messages.success(request, f"Refreshing communities (job {job.id}); this page shows its progress.")
    return redirect("dashboard-communities", workspace_id=workspace.id)


# --- fixing entities (admin): merge another into this one, undo a merge, split some of it off ------------


def _entity_or_404(workspace: Workspace, node_id: int) -> Any:
    entity = selectors.entity_get(workspace_id=workspace.id, node_id=node_id)
    if entity is None:
        raise Http404("No such entity")
    return entity


def _back(workspace: Workspace, node_id: int) -> HttpResponse:
    return redirect("dashboard-entity", workspace_id=workspace.id, node_id=node_id)


@workspace_page(policy.ADMIN)
@require_POST
def entity_merge(request: SignedInRequest, workspace: Workspace, role: str, node_id: int) -> HttpResponse:
    """Fold another entity into this one (graphsvc.services.entity_merge, as graph/entities/merge does)."""
    merged_id = int_or_zero(request.POST.get("merged"))
    with workspace_context(workspace.id):
        entity = _entity_or_404(workspace, node_id)
        other = selectors.entity_get(workspace_id=workspace.id, node_id=merged_id)
        if other is None:
            raise Http404("No such entity")
    if not confirmed(request):
        return confirmation_page(
            request,
            workspace,
            role,
            title=f"Merge {other.label} into {entity.label}?",
            message=f"{other.label}'s aliases, mentions and facts move to {entity.label}, and "
            f"{other.label} goes away. The merge can be undone from this page.",
            action=reverse("dashboard-entity-merge", args=[workspace.id, entity.id]),
            button="Merge",
            cancel_url=reverse("dashboard-entity", args=[workspace.id, entity.id]),
            section="entities",
        )
    try:
        with workspace_context(workspace.id):
            graph_services.entity_merge(workspace_id=workspace.id, survivor_id=entity.id, merged_id=other.id)
    except ApiError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{other.label} merged into {entity.label}.")
    return _back(workspace, entity.id)


@workspace_page(policy.ADMIN)
@require_POST
def entity_merge_undo(
    request: SignedInRequest, workspace: Workspace, role: str, node_id: int, merge_id: int
) -> HttpResponse:
    with workspace_context(workspace.id):
        entity = _entity_or_404(workspace, node_id)
        if not graph_selectors.entity_merge_into(
            workspace_id=workspace.id, merge_id=merge_id, node_id=entity.id
        ):
            raise Http404("No such merge")
    if not confirmed(request):
        return confirmation_page(
            request,
            workspace,
            role,
            title="Undo this merge?",
            message="The merged entity comes back with its aliases, mentions and facts; what was learnt "
            f"since stays with {entity.label}.",
            action=reverse("dashboard-entity-merge-undo", args=[workspace.id, entity.id, merge_id]),
            button="Undo merge",
            cancel_url=reverse("dashboard-entity", args=[workspace.id, entity.id]),
            section="entities",
        )
    try:
        with workspace_context(workspace.id):
            graph_services.entity_merge_undo(workspace_id=workspace.id, merge_id=merge_id)
    except ApiError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Merge undone.")
    return _back(workspace, entity.id)


@workspace_page(policy.ADMIN)
@require_POST
def entity_split(request: SignedInRequest, workspace: Workspace, role: str, node_id: int) -> HttpResponse:
    """A new entity takes the chosen aliases and facts of this one (graphsvc.services.entity_split), the
    input validated by the SDK's EntitySplitIn."""
    with workspace_context(workspace.id):
        entity = _entity_or_404(workspace, node_id)
    try:
        payload = EntitySplitIn.model_validate(
            {
                "entity": entity.label,
                "name": request.POST.get("name", ""),
                "type": request.POST.get("type") or None,
                "aliases": request.POST.getlist("aliases"),
                "factIds": request.POST.getlist("facts"),
            }
        )
    except ValidationError as error:
        messages.error(request, "; ".join(str(problem["msg"]) for problem in error.errors()))
        return _back(workspace, entity.id)
    if not confirmed(request):
        return confirmation_page(
            request,
            workspace,
            role,
            title=f"Split {payload.name} off {entity.label}?",
            message=f"A new entity {payload.name} takes {len(payload.aliases)} alias(es) and "
            f"{len(payload.factIds)} fact(s) of {entity.label}.",
            action=reverse("dashboard-entity-split", args=[workspace.id, entity.id]),
            button="Split",
            cancel_url=reverse("dashboard-entity", args=[workspace.id, entity.id]),
            section="entities",
        )
    try:
        with workspace_context(workspace.id):
            record = graph_services.entity_split(
                workspace_id=workspace.id,
                node_id=entity.id,
                name=payload.name or "",
                entity_type=payload.type,
                aliases=payload.aliases,
                fact_ids=[int_or_zero(raw) for raw in payload.factIds],
            )
    except ApiError as error:
        messages.error(request, error.message)
        return _back(workspace, entity.id)
    messages.success(request, f"{payload.name} split off {entity.label}.")
    return _back(workspace, int(record["mergedId"]))
