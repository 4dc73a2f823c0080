"""Reads for the dashboard pages. Every function runs inside the caller's workspace_context (RLS) and still
filters on workspace_id, so a missing context shows nothing rather than everything."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from graphsvc.models import (
    ENTITY_TYPES,
    GraphCommunity,
    GraphCommunityMember,
    GraphEdge,
    GraphEntityAlias,
    GraphNode,
    MemoryNodeLink,
)
from memories.models import Memory
from memories.selectors import decode_cursor, encode_cursor


@dataclass(frozen=True)
class GraphFilters:
    """The explorer's filters, as the URL carries them (graph_et, graph_nt, graph_mw, graph_mc, graph_ev)."""

    edge_types: tuple[str, ...] = ()
    node_types: tuple[str, ...] = ()
    min_weight: float = 0.0
    min_confidence: float = 0.0
    evidence_only: bool = False


@dataclass
class GraphView:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    focus: dict[str, Any] | None = None


def _active_edges(*, workspace_id: int, filters: GraphFilters) -> QuerySet[GraphEdge]:
    now = timezone.now()
    edges = GraphEdge.objects.filter(workspace_id=workspace_id, expired_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    )
    if filters.edge_types:
        edges = edges.filter(edge_type__in=filters.edge_types)
    if filters.min_weight > 0:
        edges = edges.filter(weight__gte=filters.min_weight)
    if filters.min_confidence > 0:
        edges = edges.filter(confidence__gte=filters.min_confidence)
    if filters.evidence_only:
        edges = edges.filter(evidence_memory_id__isnull=False)
    if filters.node_types:
        edges = edges.filter(
            from_node__node_type__in=filters.node_types, to_node__node_type__in=filters.node_types
        )
    return edges


def _node_payload(node: GraphNode, degree: int = 0) -> dict[str, Any]:
    return {
        "id": node.id,
        "type": node.node_type,
        "key": node.node_key,
        "label": node.label,
        "degree": degree,
    }


def _edge_payload(edge: GraphEdge) -> dict[str, Any]:
    return {
        "id": edge.id,
        "source": edge.from_node_id,
        "target": edge.to_node_id,
        "type": edge.edge_type,
        "class": edge.edge_class,
        "weight": edge.weight,
        "confidence": edge.confidence,
        "evidence": edge.evidence_memory_id is not None,
    }


_EDGE_FIELDS = (
    "id",
    "from_node_id",
    "to_node_id",
    "edge_type",
    "edge_class",
    "weight",
    "confidence",
    "evidence_memory_id",
)


def graph_top(*, workspace_id: int, filters: GraphFilters, node_limit: int, edge_limit: int) -> GraphView:
    """The best-connected nodes (by active edges that pass the filters) and the edges among them."""
    edges = _active_edges(workspace_id=workspace_id, filters=filters)
    degree: dict[int, int] = {}
    for column in ("from_node_id", "to_node_id"):
        for row in edges.values(column).annotate(n=Count("id")).order_by():
            degree[row[column]] = degree.get(row[column], 0) + row["n"]
    ranked = sorted(degree, key=lambda node_id: (-degree[node_id], node_id))
    nodes = GraphNode.objects.filter(workspace_id=workspace_id)
    if filters.node_types:
        nodes = nodes.filter(node_type__in=filters.node_types)
    if not ranked and not any(
        (filters.edge_types, filters.evidence_only, filters.min_weight, filters.min_confidence)
    ):
        # A graph without edges yet still has nodes worth seeing.
        chosen = list(nodes.order_by("-mention_count", "id")[:node_limit])
        return GraphView(nodes=[_node_payload(node) for node in chosen])
    keep = ranked[:node_limit]
    chosen_by_id = {
        node.id: node for node in nodes.filter(id__in=keep).only("id", "node_type", "node_key", "label")
    }
    picked = list(
        edges.filter(from_node_id__in=chosen_by_id, to_node_id__in=chosen_by_id)
        .only(*_EDGE_FIELDS)
        .order_by("-weight", "id")[: edge_limit + 1]
    )
    view = GraphView(
        nodes=[
            _node_payload(chosen_by_id[node_id], degree[node_id])
            for node_id in keep
            if node_id in chosen_by_id
        ],
        edges=[_edge_payload(edge) for edge in picked[:edge_limit]],
        truncated=len(ranked) > node_limit or len(picked) > edge_limit,
    )
    return view


def graph_node_get(*, workspace_id: int, node_type: str, node_key: str) -> GraphNode | None:
    return GraphNode.objects.filter(workspace_id=workspace_id, node_type=node_type, node_key=node_key).first()


def graph_ego(*, workspace_id: int, node: GraphNode, filters: GraphFilters, edge_limit: int) -> GraphView:
    """The 1-hop view of a node: its active edges that pass the filters and the nodes at their other end."""
    edges = list(
        _active_edges(workspace_id=workspace_id, filters=filters)
        .filter(Q(from_node_id=node.id) | Q(to_node_id=node.id))
        .only(*_EDGE_FIELDS)
        .order_by("-weight", "-confidence", "id")[: edge_limit + 1]
    )
    truncated = len(edges) > edge_limit
    edges = edges[:edge_limit]
    other_ids = {edge.from_node_id for edge in edges} | {edge.to_node_id for edge in edges}
    other_ids.discard(node.id)
    others = GraphNode.objects.filter(workspace_id=workspace_id, id__in=other_ids).only(
        "id", "node_type", "node_key", "label"
    )
    return GraphView(
        nodes=[_node_payload(node, len(edges))] + [_node_payload(other) for other in others],
        edges=[_edge_payload(edge) for edge in edges],
        truncated=truncated,
        focus=_node_payload(node),
    )


def graph_edge_get(*, workspace_id: int, edge_id: int) -> GraphEdge | None:
    return (
        GraphEdge.objects.select_related("from_node", "to_node")
        .filter(workspace_id=workspace_id, id=edge_id)
        .first()
    )


def graph_edge_types(*, workspace_id: int, limit: int) -> list[str]:
    return list(
        GraphEdge.objects.filter(workspace_id=workspace_id, expired_at__isnull=True)
        .values_list("edge_type", flat=True)
        .distinct()
        .order_by("edge_type")[:limit]
    )


def graph_node_types(*, workspace_id: int, limit: int) -> list[str]:
    return list(
        GraphNode.objects.filter(workspace_id=workspace_id)
        .values_list("node_type", flat=True)
        .distinct()
        .order_by("node_type")[:limit]
    )


def node_memories(*, workspace_id: int, node: GraphNode, limit: int) -> list[Memory]:
    """Live memories linked to a node (newest links first); a memory node is linked to itself."""
    if node.node_type == "memory":
        ids = [node.node_key]
    else:
        ids = [
            str(memory_id)
            for memory_id in MemoryNodeLink.objects.filter(workspace_id=workspace_id, node_id=node.id)
            .order_by("-id")
            .values_list("memory_id", flat=True)[:limit]
        ]
    parsed = [value if isinstance(value, uuid.UUID) else _uuid_or_none(value) for value in ids]
    found = Memory.objects.filter(
        workspace_id=workspace_id, id__in=[p for p in parsed if p], deleted_at__isnull=True
    )
    by_id = {memory.id: memory for memory in found}
    return [by_id[p] for p in parsed if p in by_id]


def _uuid_or_none(raw: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        return None


# --- memories -----------------------------------------------------------------------------------------------


def memory_page(*, workspace_id: int, cursor: str | None, limit: int) -> tuple[list[Memory], str | None]:
    """Every live memory of the workspace, newest first, whoever wrote it (the dashboard sees all users)."""
    rows = Memory.objects.filter(workspace_id=workspace_id, deleted_at__isnull=True)
    if cursor:
        created_at, memory_id = decode_cursor(cursor)
        rows = rows.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=memory_id))
    page = list(rows.order_by("-created_at", "-id")[: limit + 1])
    next_cursor = encode_cursor(page[limit - 1]) if len(page) > limit else None
    return page[:limit], next_cursor


def memory_get(*, workspace_id: int, memory_id: uuid.UUID) -> Memory | None:
    return Memory.objects.filter(workspace_id=workspace_id, id=memory_id, deleted_at__isnull=True).first()


def memory_graph_links(*, workspace_id: int, memory_id: uuid.UUID, limit: int) -> list[dict[str, Any]]:
    links = (
        MemoryNodeLink.objects.select_related("node")
        .filter(workspace_id=workspace_id, memory_id=memory_id)
        .order_by("role", "id")[:limit]
    )
    return [{"role": link.role, "node": link.node} for link in links]


def memory_evidence_edges(*, workspace_id: int, memory_id: uuid.UUID, limit: int) -> list[GraphEdge]:
    return list(
        GraphEdge.objects.select_related("from_node", "to_node")
        .filter(workspace_id=workspace_id, evidence_memory_id=memory_id, expired_at__isnull=True)
        .order_by("edge_type", "id")[:limit]
    )


# --- entities, facts, communities ---------------------------------------------------------------------------


def entity_list(*, workspace_id: int, query: str, entity_type: str | None, limit: int) -> list[GraphNode]:
    entities = GraphNode.objects.filter(workspace_id=workspace_id, node_type__in=ENTITY_TYPES)
    if entity_type:
        entities = entities.filter(node_type=entity_type)
    if query:
        alias_nodes = GraphEntityAlias.objects.filter(
            workspace_id=workspace_id, alias__icontains=query.lower()
        )
        entities = entities.filter(Q(label__icontains=query) | Q(id__in=alias_nodes.values("node_id")))
    return list(entities.order_by("-mention_count", "label", "id")[:limit])


def entity_get(*, workspace_id: int, node_id: int) -> GraphNode | None:
    return GraphNode.objects.filter(workspace_id=workspace_id, id=node_id, node_type__in=ENTITY_TYPES).first()


def entity_aliases(*, workspace_id: int, node: GraphNode, limit: int) -> list[str]:
    return list(
        GraphEntityAlias.objects.filter(workspace_id=workspace_id, node_id=node.id)
        .order_by("alias")
        .values_list("alias", flat=True)[:limit]
    )


def fact_list(
    *,
    workspace_id: int,
    node: GraphNode | None = None,
    query: str = "",
    include_invalid: bool = False,
    limit: int,
) -> list[GraphEdge]:
    """Entity facts (llm_entity edges), current ones first; invalidated ones only when asked for."""
    facts = GraphEdge.objects.select_related("from_node", "to_node").filter(
        workspace_id=workspace_id, origin=GraphEdge.Origin.LLM_ENTITY
    )
    if node is not None:
        facts = facts.filter(Q(from_node_id=node.id) | Q(to_node_id=node.id))
    if not include_invalid:
        facts = facts.filter(expired_at__isnull=True, valid_to__isnull=True)
    if query:
        facts = facts.filter(Q(fact__icontains=query) | Q(edge_type__icontains=query))
    return list(facts.order_by("expired_at", "-valid_from", "-id")[:limit])


def community_list(*, workspace_id: int, limit: int, member_limit: int) -> list[dict[str, Any]]:
    communities = list(GraphCommunity.objects.filter(workspace_id=workspace_id).order_by("name")[:limit])
    ids = [community.id for community in communities]
    members = GraphCommunityMember.objects.filter(workspace_id=workspace_id, community_id__in=ids)
    sizes = dict(members.values("community_id").annotate(size=Count("*")).values_list("community_id", "size"))
    # The first members by id of each community, labels joined in: one statement however large the
    # communities.
    firsts = (
        members.annotate(
            rank=Window(RowNumber(), partition_by=F("community_id"), order_by=F("node_id").asc())
        )
        .filter(rank__lte=member_limit)
        .order_by("community_id", "node_id")
        .values_list("community_id", "node__label")
    )
    labels: dict[int, list[str]] = {}
    for community_id, label in firsts:
        labels.setdefault(community_id, []).append(label)
    return [
        {"community": community, "size": sizes.get(community.id, 0), "members": labels.get(community.id, [])}
        for community in communities
    ]
