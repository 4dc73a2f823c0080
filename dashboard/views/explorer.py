"""The graph explorer: the page, its JSON data (top nodes, a node's 1-hop view, find a node) and the htmx
panels (a node, a pair of nodes, one edge)."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from config.errors import ApiError
from dashboard import graph, selectors
from dashboard.access import SignedInRequest, workspace_page
from dashboard.views.common import (
    LIST_LIMIT,
    BadRequest,
    float_param,
    int_param,
    json_error,
    list_param,
    page,
)
from graphsvc.models import GraphEdge, GraphNode
from memories.selectors import MemoryScope
from retrieval import search
from tenancy import policy
from tenancy.models import Workspace
from tenancy.rls import workspace_context

FIND_NODES = 8
FIND_MEMORIES = 8
PAIR_EDGES = 60
MAX_OFFSET = 100_000


def graph_filters_from(request: SignedInRequest) -> graph.GraphFilters:
    return graph.GraphFilters(
        edge_types=list_param(request, "graph_et"),
        node_types=list_param(request, "graph_nt"),
        min_weight=float_param(request, "graph_mw"),
        min_confidence=float_param(request, "graph_mc"),
        evidence_only=request.GET.get("graph_ev", "") in {"1", "true", "on"},
    )


def _node_from(
    request: SignedInRequest, workspace: Workspace, prefix: str = "graph_node"
) -> GraphNode | None:
    node_type, node_key = request.GET.get(f"{prefix}_type", ""), request.GET.get(f"{prefix}_key", "")
    if not (node_type and node_key):
        return None
    return graph.graph_node_get(workspace_id=workspace.id, node_type=node_type[:32], node_key=node_key[:600])


@workspace_page(policy.READ)
@require_GET
def explorer(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    with workspace_context(workspace.id):
        edge_types = graph.graph_edge_types(workspace_id=workspace.id, limit=LIST_LIMIT)
        node_types = graph.graph_node_types(workspace_id=workspace.id, limit=LIST_LIMIT)
        empty = not node_types and selectors.memory_total(workspace_id=workspace.id) == 0
    classes: dict[str, list[str]] = {}
    for entry in edge_types:
        classes.setdefault(entry["class"], []).append(entry["type"])
    config = {
        "dataUrl": f"/w/{workspace.id}/graph/data/",
        "findUrl": f"/w/{workspace.id}/graph/find/",
        "edgeUrl": f"/w/{workspace.id}/graph/edges/",
        "pairUrl": f"/w/{workspace.id}/graph/pair/",
        "nodeUrl": f"/w/{workspace.id}/graph/node/",
        "pathUrl": f"/w/{workspace.id}/graph/path/",
        "defaultNodes": settings.DASHBOARD_EXPLORER_DEFAULT_NODES,
        "maxNodes": settings.DASHBOARD_EXPLORER_MAX_NODES,
    }
    return page(
        request,
        "dashboard/explorer.html",
        workspace,
        role,
        {
            "edge_classes": [(name, classes[name]) for name in graph.EDGE_CLASSES if name in classes],
            "node_types": node_types,
            "explorer_config": config,
            "empty": empty,
            "api_base": request.build_absolute_uri("/api/sdk/v1"),
        },
        section="graph",
    )


@workspace_page(policy.READ)
@require_GET
def explorer_data(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """Nodes and edges for Cytoscape: the top nodes, or the 1-hop view of graph_node_type/graph_node_key
    (a hub's memories a page at a time from graph_offset)."""
    try:
        filters = graph_filters_from(request)
    except BadRequest as error:
        return json_error(request, "INVALID_FILTER", str(error))
    try:
        limit = int_param(
            request,
            "limit",
            default=settings.DASHBOARD_EXPLORER_DEFAULT_NODES,
            low=1,
            high=settings.DASHBOARD_EXPLORER_MAX_NODES,
        )
        offset = int_param(request, "graph_offset", default=0, low=0, high=MAX_OFFSET)
    except BadRequest:
        return json_error(
            request,
            "INVALID_LIMIT",
            f"limit must be between 1 and {settings.DASHBOARD_EXPLORER_MAX_NODES}, graph_offset at least 0",
        )
    edge_limit = settings.DASHBOARD_EXPLORER_MAX_EDGES
    with workspace_context(workspace.id):
        node = _node_from(request, workspace)
        if request.GET.get("graph_node_type") or request.GET.get("graph_node_key"):
            if node is None:
                return json_error(
                    request,
                    "NODE_NOT_FOUND",
                    "No node with this graph_node_type and graph_node_key here.",
                    status=404,
                )
            view = graph.graph_ego(
                workspace_id=workspace.id,
                node=node,
                filters=filters,
                edge_limit=edge_limit,
                offset=offset,
            )
        else:
            view = graph.graph_top(
                workspace_id=workspace.id, filters=filters, node_limit=limit, edge_limit=edge_limit
            )
    return JsonResponse(view.payload())


@workspace_page(policy.READ)
@require_GET
def explorer_find(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """Find a node or memory by words: nodes by label, key or alias; memories with the API's ranking over
    the whole workspace. Each memory carries its node, so the explorer can open its 1-hop view."""
    query = " ".join(request.GET.get("q", "").split())[:200]
    if not query:
        return JsonResponse({"query": "", "nodes": [], "memories": []})
    with workspace_context(workspace.id):
        nodes = graph.graph_node_find(workspace_id=workspace.id, query=query, limit=FIND_NODES)
        try:
            found = search.memory_search(
                workspace_id=workspace.id,
                scope=MemoryScope(workspace_wide=True),
                query=query,
                limit=FIND_MEMORIES,
                strategy="lexical",
            ).memories
        except ApiError:
            found = []
        node_ids = graph.memory_nodes_for(workspace_id=workspace.id, memory_ids=[m.id for m in found])
    memories = [
        {
            "id": str(m.id),
            "content": m.content[:200],
            "type": m.type,
            "nodeId": node_ids.get(str(m.id)),
            "key": str(m.id),
        }
        for m in found
    ]
    return JsonResponse({"query": query, "nodes": nodes, "memories": memories})


@workspace_page(policy.READ)
@require_GET
def explorer_edge(request: SignedInRequest, workspace: Workspace, role: str, edge_id: int) -> HttpResponse:
    """One edge's panel (an htmx partial): what a deep link's graph_edge_id opens."""
    with workspace_context(workspace.id):
        edge = graph.graph_edge_get(workspace_id=workspace.id, edge_id=edge_id)
        if edge is None:
            raise Http404("No such edge")
        evidence = (
            selectors.memory_get(workspace_id=workspace.id, memory_id=edge.evidence_memory_id)
            if edge.evidence_memory_id
            else None
        )
        from_state, to_state = _edge_states(workspace, edge)
    return render(
        request,
        "dashboard/_edge_panel.html",
        {
            "workspace": workspace,
            "edge": edge,
            "edge_class": graph.edge_class_of(edge.edge_type, edge.origin),
            "evidence": evidence,
            "from_state": from_state,
            "to_state": to_state,
            "now": timezone.now(),
        },
    )


def _edge_states(workspace: Workspace, edge: GraphEdge) -> tuple[str | None, str | None]:
    """Which end of a contradiction or replacement holds now, or whether a fact is the current value."""
    if edge.edge_type in ("contradicts", "supersedes") and edge.from_node.node_type == "memory":
        ends = [graph.uuid_or_none(edge.from_node.node_key), graph.uuid_or_none(edge.to_node.node_key)]
        states = selectors.conflict_states(workspace_id=workspace.id, memory_ids=[e for e in ends if e])
        return (
            states.get(ends[0]) if ends[0] else None,
            states.get(ends[1]) if ends[1] else None,
        )
    if edge.origin == GraphEdge.Origin.LLM_ENTITY:
        state = selectors.fact_states(workspace_id=workspace.id, facts=[edge]).get(edge.id)
        if edge.valid_to or edge.expired_at:
            state = None
        return None, state
    return None, None


@workspace_page(policy.READ)
@require_GET
def explorer_pair(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """Everything between two nodes (an htmx partial): the drawn edge is every edge of the pair."""
    try:
        a = int_param(request, "a", default=0, low=1, high=2**62)
        b = int_param(request, "b", default=0, low=1, high=2**62)
    except BadRequest:
        raise Http404("No such pair") from None
    with workspace_context(workspace.id):
        first = graph.graph_node_by_id(workspace_id=workspace.id, node_id=a)
        second = graph.graph_node_by_id(workspace_id=workspace.id, node_id=b)
        if first is None or second is None:
            raise Http404("No such pair")
        pair = graph.graph_pair(workspace_id=workspace.id, a=first, b=second, limit=PAIR_EDGES)
        evidence_ids = {e["edge"].evidence_memory_id for e in pair["edges"] if e["edge"].evidence_memory_id}
        evidence = selectors.memories_by_id(workspace_id=workspace.id, memory_ids=list(evidence_ids))
        ends = [graph.uuid_or_none(n.node_key) if n.node_type == "memory" else None for n in (first, second)]
        states = selectors.conflict_states(workspace_id=workspace.id, memory_ids=[e for e in ends if e])
        fact_states = selectors.fact_states(
            workspace_id=workspace.id,
            facts=[e["edge"] for e in pair["edges"] if e["edge"].origin == GraphEdge.Origin.LLM_ENTITY],
        )
    nodes = {first.id: first, second.id: second}
    return render(
        request,
        "dashboard/_pair_panel.html",
        {
            "workspace": workspace,
            "a": first,
            "b": second,
            "a_state": states.get(ends[0]) if ends[0] else None,
            "b_state": states.get(ends[1]) if ends[1] else None,
            "edges": [
                {
                    **e,
                    "evidence": evidence.get(e["edge"].evidence_memory_id),
                    "state": fact_states.get(e["edge"].id) if not e["edge"].valid_to else None,
                }
                for e in pair["edges"]
            ],
            "links": [
                {"type": link["type"], "source": nodes[link["source"]], "target": nodes[link["target"]]}
                for link in pair["links"]
            ],
            "now": timezone.now(),
        },
    )


@workspace_page(policy.READ)
@require_GET
def explorer_node(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """The selected node's panel (an htmx partial): what it is, its memories (the evidence memory of the
    selected edge marked) and where to go from it."""
    with workspace_context(workspace.id):
        node = _node_from(request, workspace)
        if node is None:
            raise Http404("No such node")
        hub = None
        memory = None
        changes = None
        state = None
        if node.node_type == "memory":
            found = selectors.node_memories(workspace_id=workspace.id, node=node, limit=1)
            memory = found[0] if found else None
        else:
            hub = selectors.hub_summary(
                workspace_id=workspace.id, node=node, per_type=settings.DASHBOARD_LINKED_MEMORIES
            )
        evidence_id = graph.uuid_or_none(request.GET.get("evidence", "")[:64])
        evidence = (
            selectors.memory_get(workspace_id=workspace.id, memory_id=evidence_id)
            if evidence_id is not None and hub is not None
            else None
        )
        if memory is not None:
            changes = selectors.memory_changes(workspace_id=workspace.id, memory=memory)
            others = [c["memory"].id for rows in changes.values() for c in rows]
            states = selectors.conflict_states(workspace_id=workspace.id, memory_ids=[memory.id, *others])
            state = states.get(memory.id)
            for rows in changes.values():
                for c in rows:
                    c["state"] = states.get(c["memory"].id)
    return render(
        request,
        "dashboard/_node_panel.html",
        {
            "workspace": workspace,
            "node": node,
            "hub": hub,
            "memory": memory,
            "state": state,
            "changes": changes,
            "evidence_id": request.GET.get("evidence", ""),
            "evidence": evidence,
            "is_entity": node.node_type in selectors.ENTITY_TYPES,
        },
    )


@workspace_page(policy.READ)
@require_GET
def explorer_path(request: SignedInRequest, workspace: Workspace, role: str) -> HttpResponse:
    """How is A connected to B: the shortest typed paths between two nodes (ids a and b), each step explained
    in words, as JSON for the canvas."""
    try:
        a = int_param(request, "a", default=0, low=1, high=2**62)
        b = int_param(request, "b", default=0, low=1, high=2**62)
    except BadRequest:
        return json_error(request, "INVALID_NODE", "a and b must be node ids (positive integers).")
    if not a or not b:
        return json_error(request, "INVALID_NODE", "Give both ends: a and b, node ids.")
    try:
        hops = int_param(
            request, "max_hops", default=graph.PATH_DEFAULT_HOPS, low=1, high=graph.PATH_MAX_HOPS
        )
    except BadRequest:
        return json_error(request, "INVALID_LIMIT", f"max_hops must be between 1 and {graph.PATH_MAX_HOPS}.")
    with workspace_context(workspace.id):
        first = graph.graph_node_by_id(workspace_id=workspace.id, node_id=a)
        second = graph.graph_node_by_id(workspace_id=workspace.id, node_id=b)
        if first is None or second is None:
            return json_error(request, "NODE_NOT_FOUND", "No node with this id here.", status=404)
        found = graph.graph_paths(workspace_id=workspace.id, a=first, b=second, max_hops=hops)
    return JsonResponse({"a": a, "b": b, "maxHops": hops, **found})
