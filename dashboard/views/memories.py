"""Memories: the list with filters and totals, search over the whole workspace with the API's ranking, one
memory's page (session, speaker, metadata, what changed it), and edit and forget through the same pipeline
flows and request schema as the SDK."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from pydantic import ValidationError

from config.errors import ApiError
from dashboard import forms, selectors
from dashboard.access import SignedInRequest, workspace_page
from dashboard.views.common import LIST_LIMIT, confirmation_page, confirmed, int_or_zero, page
from memories.schemas import EditIn
from memories.selectors import MemoryScope, pipeline_status
from pipeline import services as pipeline
from retrieval import search
from tenancy import policy
from tenancy.models import Workspace
from tenancy.rls import workspace_context

MEMORY_PAGE_SIZE = 25
# How deep a dashboard search ranks before its filters and pages apply: the total counts matches up to here.
SEARCH_DEPTH = 200
SESSION_LIMIT = 50


def _filters(data: dict[str, Any]) -> selectors.MemoryFilters:
    return selectors.MemoryFilters(
        user_id=data.get("user_id") or "",
        project_id=data.get("project_id") or "",
        type=data.get("type") or "",
        layer=data.get("layer") or "",
        tag=(data.get("tag") or "").lower(),
        session=data.get("session") or "",
    )


@workspace_page(policy.READ)
@require_GET
def memories(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """Every live memory (newest first) or a search over all of them (every user, every project: a member
    may read the whole workspace), with filters and the total."""
    form = forms.MemorySearchForm(request.GET)
    with workspace_context(workspace.id):
        facets = selectors.memory_facets(workspace_id=workspace.id, limit=LIST_LIMIT)
        workspace_total = selectors.memory_total(workspace_id=workspace.id)
    context: dict[str, Any] = {
        "form": form,
        "rows": [],
        "facets": facets,
        "workspace_total": workspace_total,
        "total": 0,
        "api_base": request.build_absolute_uri("/api/sdk/v1"),
    }
    if not form.is_valid():
        return page(
            request, "dashboard/memories.html", workspace, role, context, section="memories", status=400
        )
    data = form.cleaned_data
    filters = _filters(data)
    trace, next_cursor, depth_reached = None, None, False
    with workspace_context(workspace.id):
        try:
            if data["q"]:
                outcome = search.memory_search(
                    workspace_id=workspace.id,
                    # Replaced memories stay findable here, each below what replaced it and marked outdated:
                    # a person looking for what changed must see both sides.
                    scope=MemoryScope(workspace_wide=True, include_superseded=True),
                    query=data["q"],
                    type=filters.type or None,
                    layer=filters.layer or None,
                    limit=SEARCH_DEPTH,
                    strategy=data["strategy"] or "lexical",
                )
                matched = [m for m in outcome.memories if filters.matches(m)]
                depth_reached = len(outcome.memories) >= SEARCH_DEPTH
                start = int_or_zero(data["cursor"])
                rows = matched[start : start + MEMORY_PAGE_SIZE]
                if start + MEMORY_PAGE_SIZE < len(matched):
                    next_cursor = str(start + MEMORY_PAGE_SIZE)
                trace, total = outcome.trace(), len(matched)
            else:
                rows, next_cursor = selectors.memory_page(
                    workspace_id=workspace.id,
                    cursor=data["cursor"] or None,
                    limit=MEMORY_PAGE_SIZE,
                    filters=filters,
                )
                total = selectors.memory_total(workspace_id=workspace.id, filters=filters)
        except (ApiError, ValueError) as error:
            form.add_error(None, getattr(error, "message", None) or str(error))
            rows, total = [], 0
        statuses = pipeline_status(workspace_id=workspace.id, memory_ids=[row.id for row in rows])
        flags = selectors.memory_flags(workspace_id=workspace.id, memory_ids=[row.id for row in rows])
    query = request.GET.copy()
    query.pop("cursor", None)
    query.pop("page", None)
    context.update(
        {
            "rows": [(row, statuses.get(row.id), flags.get(row.id, set())) for row in rows],
            "trace": trace,
            "next_cursor": next_cursor,
            "total": total,
            "depth_reached": depth_reached,
            "search_depth": SEARCH_DEPTH,
            "filtered": filters.any() or bool(data["q"]),
            "more_query": query.urlencode(),
        }
    )
    if request.headers.get("HX-Request"):
        # "Load more" swaps in just the next rows; a new search replaces the whole table.
        partial = "dashboard/_memory_page.html" if request.GET.get("page") else "dashboard/_memory_rows.html"
        return render(request, partial, {"workspace": workspace, **context})
    return page(request, "dashboard/memories.html", workspace, role, context, section="memories")


def _memory_or_404(workspace: Workspace, memory_id: uuid.UUID) -> Any:
    memory = selectors.memory_get(workspace_id=workspace.id, memory_id=memory_id)
    if memory is None:
        raise Http404("No such memory")
    return memory


@workspace_page(policy.READ)
@require_GET
def memory_detail(
    request: SignedInRequest, workspace: Workspace, role: str, memory_id: uuid.UUID
) -> HttpResponse:
    with workspace_context(workspace.id):
        memory = _memory_or_404(workspace, memory_id)
        context = _memory_context(workspace, memory)
    return page(request, "dashboard/memory_detail.html", workspace, role, context, section="memories")


def _memory_context(workspace: Workspace, memory: Any) -> dict[str, Any]:
    metadata = memory.metadata if isinstance(memory.metadata, dict) else {}
    changes = selectors.memory_changes(workspace_id=workspace.id, memory=memory)
    others = [c["memory"].id for rows in changes.values() for c in rows]
    states = selectors.conflict_states(workspace_id=workspace.id, memory_ids=[memory.id, *others])
    for rows in changes.values():
        for c in rows:
            c["state"] = states.get(c["memory"].id)
    return {
        "memory": memory,
        "state": states.get(memory.id),
        "pipeline": pipeline_status(workspace_id=workspace.id, memory_ids=[memory.id]).get(memory.id),
        "links": selectors.memory_graph_links(
            workspace_id=workspace.id, memory_id=memory.id, limit=LIST_LIMIT
        ),
        "edges": selectors.memory_evidence_edges(
            workspace_id=workspace.id, memory_id=memory.id, limit=LIST_LIMIT
        ),
        "changes": changes,
        "session": selectors.memory_session(workspace_id=workspace.id, memory=memory, limit=SESSION_LIMIT),
        "session_id": metadata.get("sessionId") if isinstance(metadata.get("sessionId"), str) else None,
        "speaker": metadata.get("speaker") if isinstance(metadata.get("speaker"), str) else None,
        "other_metadata": sorted((k, v) for k, v in metadata.items() if k not in {"sessionId", "speaker"}),
    }


def _edit_form_initial(memory: Any) -> dict[str, Any]:
    import json

    return {
        "content": memory.content,
        "type": memory.type,
        "layer": memory.layer,
        "tags": ", ".join(memory.tags or []),
        "category": memory.category or "",
        "metadata": json.dumps(memory.metadata, indent=2, ensure_ascii=False) if memory.metadata else "",
    }


def _edit_changes(memory: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Only what the form changed: re-sending an unchanged layer would restart a working memory's expiry."""
    wanted = {
        "content": data["content"],
        "type": data["type"],
        "layer": data["layer"],
        "tags": data["tags"],
        "category": data["category"] or None,
        "metadata": data["metadata"],
    }
    current = {
        "content": memory.content,
        "type": memory.type,
        "layer": memory.layer,
        "tags": list(memory.tags or []),
        "category": memory.category,
        "metadata": memory.metadata or None,
    }
    return {name: value for name, value in wanted.items() if value != current[name]}


def _validated(memory: Any, changes: dict[str, Any]) -> dict[str, Any]:
    """The changes as memories/edit would accept them: the SDK's EditIn is the one validation path."""
    body = {
        "id": str(memory.id),
        **{("category" if k == "category" else k): v for k, v in changes.items()},
        "scope": {"userId": memory.user_id, "projectId": memory.project_id},
    }
    payload = EditIn.model_validate(body)
    return {name: getattr(payload, name) for name in changes}


@workspace_page(policy.WRITE)
@require_http_methods(["GET", "POST"])
def memory_edit(
    request: SignedInRequest, workspace: Workspace, role: str, memory_id: uuid.UUID
) -> HttpResponse:
    """Edit a memory in its own scope (its userId and projectId) through pipeline.memory_edit_flow, as
    memories/edit does: re-embedded and re-mapped when its text or tags change."""
    with workspace_context(workspace.id):
        memory = _memory_or_404(workspace, memory_id)
    form = forms.MemoryEditForm(request.POST or None, initial=_edit_form_initial(memory))
    if request.method == "POST" and form.is_valid():
        changes = _edit_changes(memory, form.cleaned_data)
        if not changes:
            messages.info(request, "Nothing changed.")
            return redirect("dashboard-memory", workspace_id=workspace.id, memory_id=memory.id)
        try:
            validated = _validated(memory, changes)
            with workspace_context(workspace.id):
                pipeline.memory_edit_flow(
                    workspace_id=workspace.id,
                    scope=MemoryScope(user_id=memory.user_id, project_id=memory.project_id),
                    memory_id=str(memory.id),
                    changes=validated,
                )
        except ValidationError as error:
            for problem in error.errors():
                field = str(problem["loc"][0]) if problem["loc"] else None
                form.add_error(field if field in form.fields else None, problem["msg"])
        except ApiError as error:
            form.add_error(None, error.message)
        else:
            messages.success(
                request, "Memory saved. Its graph links are updated; embedding runs in the background."
            )
            return redirect("dashboard-memory", workspace_id=workspace.id, memory_id=memory.id)
    status = 400 if request.method == "POST" else 200
    return page(
        request,
        "dashboard/memory_edit.html",
        workspace,
        role,
        {"memory": memory, "form": form},
        section="memories",
        status=status,
    )


@workspace_page(policy.WRITE)
@require_POST
def memory_forget(
    request: SignedInRequest, workspace: Workspace, role: str, memory_id: uuid.UUID
) -> HttpResponse:
    """Forget a memory in its own scope through pipeline.memory_forget_flow (it leaves the graph and the
    vector index at once), after a confirmation."""
    with workspace_context(workspace.id):
        memory = _memory_or_404(workspace, memory_id)
    if not confirmed(request):
        return confirmation_page(
            request,
            workspace,
            role,
            title="Forget this memory?",
            message=f"“{memory.content[:200]}” leaves search, context and the graph. Agents will no "
            "longer see it.",
            action=reverse("dashboard-memory-forget", args=[workspace.id, memory.id]),
            button="Forget memory",
            cancel_url=reverse("dashboard-memory", args=[workspace.id, memory.id]),
            section="memories",
        )
    try:
        with workspace_context(workspace.id):
            pipeline.memory_forget_flow(
                workspace_id=workspace.id,
                scope=MemoryScope(user_id=memory.user_id, project_id=memory.project_id),
                memory_id=str(memory.id),
            )
    except ApiError as error:
        messages.error(request, error.message)
        return redirect("dashboard-memory", workspace_id=workspace.id, memory_id=memory.id)
    messages.success(request, "Memory forgotten.")
    return redirect("dashboard-memories", workspace_id=workspace.id)
