"""Reads for the graph explorer: the graph as a person reads it.

Three things differ from the stored graph, on purpose:
- a memory's links to its repo, topics, category, user and entities (memory_node_links) are drawn as edges,
  so a memory's 1-hop view shows what it is about;
- edges are aggregated per (source, target, type) with a count: deterministic edges are stored once per
  evidence memory, so the same repo → topic edge exists once per memory that says so;
- a hub's memory links are capped per view (HUB_LINKS) and the rest counted on the node (`hidden`), so a topic
  with 200 memories is one node with a count instead of a star of 200 lines.

Every function runs inside the caller's workspace_context (RLS) and still filters on workspace_id."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.db import connections
from django.db.models import F, Q
from django.db.models.functions import Now

from config.schemas import finite
from dashboard.selectors import conflict_states
from graphsvc.models import ENTITY_TYPES, GraphEdge, GraphNode

# How a memory link is drawn: its role → the edge type people see. The `self` link is the memory node itself,
# and `type` (decision, note, …) is a property of the memory, not something it is about: a hub of every
# memory of that type.
LINK_TYPES = {
    "scope": "in_repo",
    "subject": "for_user",
    "category": "in_category",
    "tag": "tagged",
    "mentions": "mentions_entity",
}
LINK_ROLES = {edge_type: role for role, edge_type in LINK_TYPES.items()}

# Edge classes as the explorer draws and explains them.
STRUCTURAL, SIMILARITY, RELATIONSHIP, FACT, CONTRADICTS, SUPERSEDES = (
    "structural",
    "similarity",
    "relationship",
    "fact",
    "contradicts",
    "supersedes",
)
EDGE_CLASSES = (CONTRADICTS, SUPERSEDES, RELATIONSHIP, FACT, SIMILARITY, STRUCTURAL)
# Which edges survive the edge cap first: what a person looks for before what is merely there.
_CLASS_PRIORITY = {name: rank for rank, name in enumerate(EDGE_CLASSES)}

# A hub draws at most this many links to memories in one view; the rest are counted on the node.
HUB_LINKS = 8
# Co-occurrence edges between repos, topics, categories and users (one per memory that says so, aggregated)
# join almost every pair of busy nodes: a view keeps each node's strongest few, the skeleton of the graph.
COOCCURRENCE_PER_NODE = 3
# A focused node's 1-hop view lists this many of its memories per page ("more" loads the next page).
EGO_MEMORIES = 40


def edge_class_of(edge_type: str, origin: str) -> str:
    if edge_type == "contradicts":
        return CONTRADICTS
    if edge_type == "supersedes":
        return SUPERSEDES
    if edge_type == "similar_to" or origin == GraphEdge.Origin.SIMILARITY:
        return SIMILARITY
    if origin == GraphEdge.Origin.LLM_ENTITY:
        return FACT
    if origin == GraphEdge.Origin.MAPPING:
        return STRUCTURAL
    return RELATIONSHIP


@dataclass(frozen=True)
class GraphFilters:
    """The explorer's filters, as the URL carries them (graph_et, graph_nt, graph_mw, graph_mc, graph_ev)."""

    edge_types: tuple[str, ...] = ()
    node_types: tuple[str, ...] = ()
    min_weight: float = 0.0
    min_confidence: float = 0.0
    evidence_only: bool = False

    @property
    def narrows_edges(self) -> bool:
        return bool(self.edge_types or self.evidence_only or self.min_weight or self.min_confidence)

    def link_roles(self) -> list[str]:
        """The memory-link roles these filters let through (a link is evidenced by its memory, weight and
        confidence 1)."""
        if not self.edge_types:
            return list(LINK_TYPES)
        return [LINK_ROLES[t] for t in self.edge_types if t in LINK_ROLES]


@dataclass
class GraphView:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    focus: dict[str, Any] | None = None
    # The focused node's memories not on this page: {"count": n, "offset": next page's offset}.
    more: dict[str, int] | None = None

    def payload(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "edges": self.edges,
            "truncated": self.truncated,
            "focus": self.focus,
            "more": self.more,
        }


# --- SQL pieces ---------------------------------------------------------------------------------------------

_ACTIVE = "e.expired_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > now())"


def _edge_conditions(filters: GraphFilters, params: dict[str, Any]) -> str:
    parts = [_ACTIVE]
    if filters.edge_types:
        params["edge_types"] = list(filters.edge_types)
        parts.append("e.edge_type = ANY(%(edge_types)s)")
    if filters.min_weight > 0:
        params["min_weight"] = filters.min_weight
        parts.append("e.weight >= %(min_weight)s")
    if filters.min_confidence > 0:
        params["min_confidence"] = filters.min_confidence
        parts.append("e.confidence >= %(min_confidence)s")
    if filters.evidence_only:
        parts.append("e.evidence_memory_id IS NOT NULL")
    if filters.node_types:
        params["node_types"] = list(filters.node_types)
        parts.append(
            "EXISTS (SELECT 1 FROM graph_nodes fa WHERE fa.id = e.from_node_id"
            " AND fa.node_type = ANY(%(node_types)s))"
            " AND EXISTS (SELECT 1 FROM graph_nodes fb WHERE fb.id = e.to_node_id"
            " AND fb.node_type = ANY(%(node_types)s))"
        )
    return " AND ".join(parts)


_AGGREGATE_EDGES = """
SELECT e.from_node_id, e.to_node_id, e.edge_type, count(*), max(e.weight), max(e.confidence), min(e.id),
       bool_or(e.evidence_memory_id IS NOT NULL), min(e.origin)
FROM graph_edges e
WHERE e.workspace_id = %(ws)s AND {conditions} AND {where}
GROUP BY 1, 2, 3
"""


def _rows(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connections["app"].cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


# --- memory links -------------------------------------------------------------------------------------------
# A link is (memory node id, linked node id, role). Links name their memory by id; the memory's node is the
# link of role `self`. The mapping is made here, never by joining the links table to itself: on a table whose
# statistics lag behind a burst of writes, the planner's estimate of one row turns that join into a nested
# loop over every pair (seconds for a few thousand memories).

Link = tuple[int, int, str]


def _link_roles(filters: GraphFilters) -> list[str]:
    """The link roles the filters let through: none when they keep memories off the canvas."""
    if filters.node_types and "memory" not in filters.node_types:
        return []
    return filters.link_roles()


def _typed(workspace_id: int, filters: GraphFilters, node_ids: set[int]) -> set[int]:
    """The nodes among node_ids whose type the node-type filter allows."""
    if not filters.node_types or not node_ids:
        return node_ids
    return {
        row[0]
        for row in _rows(
            "SELECT id FROM graph_nodes WHERE workspace_id = %(ws)s AND id = ANY(%(ids)s)"
            " AND node_type = ANY(%(types)s)",
            {"ws": workspace_id, "ids": list(node_ids), "types": list(filters.node_types)},
        )
    }


def _memory_nodes(workspace_id: int, memory_ids: list[uuid.UUID] | None) -> dict[uuid.UUID, int]:
    """memory id → its node id, for the given memories or (None) all of the workspace."""
    sql = "SELECT memory_id, node_id FROM memory_node_links WHERE workspace_id = %(ws)s AND role = 'self'"
    params: dict[str, Any] = {"ws": workspace_id}
    if memory_ids is not None:
        if not memory_ids:
            return {}
        sql += " AND memory_id = ANY(%(ids)s)"
        params["ids"] = memory_ids
    return {memory_id: node_id for memory_id, node_id in _rows(sql, params)}


def _links(
    *,
    workspace_id: int,
    filters: GraphFilters,
    memory_ids: list[uuid.UUID] | None = None,
    node_id: int | None = None,
) -> list[Link]:
    """Memory links that pass the filters: of the given memories, to one node, or (neither) all of them."""
    roles = _link_roles(filters)
    if not roles or memory_ids == []:
        return []
    sql = (
        "SELECT memory_id, node_id, role FROM memory_node_links"
        " WHERE workspace_id = %(ws)s AND role = ANY(%(roles)s)"
    )
    params: dict[str, Any] = {"ws": workspace_id, "roles": roles}
    if memory_ids is not None:
        sql += " AND memory_id = ANY(%(ids)s)"
        params["ids"] = memory_ids
    if node_id is not None:
        sql += " AND node_id = %(node)s"
        params["node"] = node_id
    rows = _rows(sql, params)
    selves = _memory_nodes(
        workspace_id,
        memory_ids if memory_ids is not None else None if node_id is None else list({row[0] for row in rows}),
    )
    links = [(selves[m], n, role) for m, n, role in rows if m in selves]
    if filters.node_types:
        allowed = _typed(workspace_id, filters, {n for _, n, _ in links})
        links = [link for link in links if link[1] in allowed]
    return links


def _edge_payload(row: tuple[Any, ...]) -> dict[str, Any]:
    source, target, edge_type, count, weight, confidence, first_id, evidence, origin = row
    return {
        "id": f"e{first_id}",
        "edgeId": first_id,
        "source": source,
        "target": target,
        "type": edge_type,
        "class": edge_class_of(edge_type, origin),
        "count": int(count),
        # Finite: the explorer's JSON must parse even when a stored weight is NaN.
        "weight": round(finite(weight), 4),
        "confidence": round(finite(confidence), 4),
        "evidence": bool(evidence),
    }


def _link_payload(memory_node: int, node: int, role: str) -> dict[str, Any]:
    return {
        "id": f"l{memory_node}-{node}-{role}",
        "edgeId": None,
        "source": memory_node,
        "target": node,
        "type": LINK_TYPES[role],
        "class": STRUCTURAL,
        "count": 1,
        "weight": 1.0,
        "confidence": 1.0,
        "evidence": True,
    }


def _edges_among(
    *, workspace_id: int, filters: GraphFilters, node_ids: list[int], links: list[Link]
) -> list[dict[str, Any]]:
    """Aggregated edges with both ends among node_ids, and the given memory links that have."""
    if not node_ids:
        return []
    params: dict[str, Any] = {"ws": workspace_id, "ids": node_ids}
    edges = [
        _edge_payload(row)
        for row in _rows(
            _AGGREGATE_EDGES.format(
                conditions=_edge_conditions(filters, params),
                where="e.from_node_id = ANY(%(ids)s) AND e.to_node_id = ANY(%(ids)s)",
            ),
            params,
        )
    ]
    chosen = set(node_ids)
    edges += [_link_payload(*link) for link in links if link[0] in chosen and link[1] in chosen]
    return _fold_symmetric(edges)


# --- nodes --------------------------------------------------------------------------------------------------


def _nodes(*, workspace_id: int, node_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Node payloads with what the explorer shows on them: memories linked to a non-memory node, and for a
    memory whether something replaced or contradicts it."""
    if not node_ids:
        return {}
    rows = _rows(
        """
        SELECT n.id, n.node_type, n.node_key, n.label, n.metadata ->> 'type', n.mention_count
        FROM graph_nodes n WHERE n.workspace_id = %(ws)s AND n.id = ANY(%(ids)s)
        """,
        {"ws": workspace_id, "ids": node_ids},
    )
    nodes = {
        row[0]: {
            "id": row[0],
            "type": row[1],
            "key": row[2],
            "label": row[3] or row[2],
            "memoryType": row[4],
            "degree": 0,
            "memories": 0,
            "hidden": 0,
            "superseded": False,
            "contradicted": False,
            "state": None,
        }
        for row in rows
    }
    others = [node_id for node_id, node in nodes.items() if node["type"] != "memory"]
    if others:
        for node_id, count in _rows(
            """
            SELECT node_id, count(*) FROM memory_node_links
            WHERE workspace_id = %(ws)s AND node_id = ANY(%(ids)s) AND role <> 'self'
            GROUP BY node_id
            """,
            {"ws": workspace_id, "ids": others},
        ):
            nodes[node_id]["memories"] = int(count)
    memory_nodes = [node_id for node_id, node in nodes.items() if node["type"] == "memory"]
    if memory_nodes:
        for node_id, edge_type in _rows(
            f"""
            SELECT DISTINCT e.to_node_id, e.edge_type FROM graph_edges e
            WHERE e.workspace_id = %(ws)s AND {_ACTIVE} AND e.to_node_id = ANY(%(ids)s)
              AND e.edge_type IN ('supersedes', 'contradicts')
            """,
            {"ws": workspace_id, "ids": memory_nodes},
        ):
            nodes[node_id]["superseded" if edge_type == "supersedes" else "contradicted"] = True
        keys = {_uuid(nodes[i]["key"]): i for i in memory_nodes}
        for (memory_id,) in _rows(
            """
            SELECT id FROM memories WHERE workspace_id = %(ws)s AND id = ANY(%(ids)s)
              AND superseded_by IS NOT NULL
            """,
            {"ws": workspace_id, "ids": [k for k in keys if k]},
        ):
            nodes[keys[memory_id]]["superseded"] = True
        # Which side holds, for the few memories in a contradiction or a replacement.
        flagged = {
            memory_id: node_id
            for memory_id, node_id in keys.items()
            if memory_id and (nodes[node_id]["superseded"] or nodes[node_id]["contradicted"])
        }
        if flagged:
            for memory_id, state in conflict_states(
                workspace_id=workspace_id, memory_ids=list(flagged)
            ).items():
                nodes[flagged[memory_id]]["state"] = state
    return nodes


def _uuid(raw: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        return None


def uuid_or_none(raw: str | None) -> uuid.UUID | None:
    return _uuid(raw) if raw else None


def node_labels(*, workspace_id: int, refs: list[str]) -> dict[str, tuple[str, str]]:
    """ "<node_type>:<node_key>" references (as traces name nodes) → (label, node type)."""
    pairs = [ref.split(":", 1) for ref in refs if ":" in ref][:500]
    if not pairs:
        return {}
    rows = _rows(
        "SELECT node_type, node_key, label FROM graph_nodes WHERE workspace_id = %(ws)s"
        " AND (node_type, node_key) IN (SELECT * FROM unnest(%(types)s::text[], %(keys)s::text[]))",
        {"ws": workspace_id, "types": [p[0] for p in pairs], "keys": [p[1] for p in pairs]},
    )
    return {f"{t}:{k}": (label or k, t) for t, k, label in rows}


def graph_node_get(*, workspace_id: int, node_type: str, node_key: str) -> GraphNode | None:
    return GraphNode.objects.filter(workspace_id=workspace_id, node_type=node_type, node_key=node_key).first()


def graph_node_by_id(*, workspace_id: int, node_id: int) -> GraphNode | None:
    return GraphNode.objects.filter(workspace_id=workspace_id, id=node_id).first()


# --- shaping a view -----------------------------------------------------------------------------------------


def _cap_hubs(
    nodes: dict[int, dict[str, Any]], edges: list[dict[str, Any]], *, keep: set[int], rank: dict[int, int]
) -> list[dict[str, Any]]:
    """At most HUB_LINKS memory links per non-memory node (the best-connected memories stay); the rest are
    counted on the node as `hidden`. Nodes in `keep` (the focus) are not capped. A memory with no other edge
    in the view keeps its link to its most specific node (the one with the fewest links here), so it hangs
    where it says the most instead of floating or vanishing."""
    by_hub: dict[int, list[dict[str, Any]]] = {}
    for edge in edges:
        if edge["edgeId"] is None and edge["target"] not in keep:
            by_hub.setdefault(edge["target"], []).append(edge)
    if not any(len(links) > HUB_LINKS for links in by_hub.values()):
        return edges
    others = {e["source"] for e in edges if e["edgeId"] is not None} | {
        e["target"] for e in edges if e["edgeId"] is not None
    }
    anchor: dict[int, dict[str, Any]] = {}
    for edge in edges:
        if edge["edgeId"] is not None or edge["source"] in others:
            continue
        size = len(by_hub.get(edge["target"], ())) if edge["target"] not in keep else 0
        best = anchor.get(edge["source"])
        if best is None or (size, edge["target"]) < (
            len(by_hub.get(best["target"], ())) if best["target"] not in keep else 0,
            best["target"],
        ):
            anchor[edge["source"]] = edge
    anchored = {edge["id"] for edge in anchor.values()}
    dropped: set[str] = set()
    for hub, links in by_hub.items():
        if len(links) <= HUB_LINKS:
            continue
        links.sort(key=lambda e: (e["id"] not in anchored, -rank.get(e["source"], 0), e["source"]))
        kept = max(HUB_LINKS, sum(1 for e in links if e["id"] in anchored))
        for edge in links[kept:]:
            dropped.add(edge["id"])
        if hub in nodes:
            nodes[hub]["hidden"] += len(links) - kept
    return [edge for edge in edges if edge["id"] not in dropped]


def _cap_cooccurrence(edges: list[dict[str, Any]], *, keep: set[int]) -> list[dict[str, Any]]:
    """Structural edges between two non-memory nodes survive when they are among the COOCCURRENCE_PER_NODE
    strongest (by how many memories support them) of either end, or touch a node in `keep`."""
    structural = [e for e in edges if e["class"] == STRUCTURAL and e["edgeId"] is not None]
    by_node: dict[int, list[dict[str, Any]]] = {}
    for edge in structural:
        by_node.setdefault(edge["source"], []).append(edge)
        by_node.setdefault(edge["target"], []).append(edge)
    kept: set[str] = set()
    for node_id, touching in by_node.items():
        if node_id in keep:
            kept.update(e["id"] for e in touching)
            continue
        touching.sort(key=lambda e: (-e["count"], e["id"]))
        kept.update(e["id"] for e in touching[:COOCCURRENCE_PER_NODE])
    dropped = {e["id"] for e in structural} - kept
    return [e for e in edges if e["id"] not in dropped]


# In a big overview each node keeps its strongest few similar_to edges: thousands of "close in meaning" lines
# say less than the clusters they already form, and cost most of the drawing.
SIMILAR_PER_NODE_BIG = 2
BIG_VIEW = 500


def _cap_similarity(edges: list[dict[str, Any]], *, per_node: int) -> list[dict[str, Any]]:
    """At most per_node similar_to edges per node, the strongest first; a node that has no other edge keeps
    one, so nothing is left floating."""
    covered = {e["source"] for e in edges if e["class"] != SIMILARITY} | {
        e["target"] for e in edges if e["class"] != SIMILARITY
    }
    similar = sorted((e for e in edges if e["class"] == SIMILARITY), key=lambda e: (-e["weight"], e["id"]))
    used: Counter[int] = Counter()
    kept: set[str] = set()
    for edge in similar:
        a, b = edge["source"], edge["target"]
        if (used[a] < per_node and used[b] < per_node) or a not in covered or b not in covered:
            kept.add(edge["id"])
            used[a] += 1
            used[b] += 1
            covered.update((a, b))
    return [e for e in edges if e["class"] != SIMILARITY or e["id"] in kept]


# Stored once per direction, meant both ways: drawn (and counted against the cap) once.
SYMMETRIC_TYPES = ("similar_to", "contradicts")


def _fold_symmetric(edges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    folded: dict[tuple[int, int, str], dict[str, Any]] = {}
    result = []
    for edge in edges:
        if edge["type"] not in SYMMETRIC_TYPES:
            result.append(edge)
            continue
        key = (min(edge["source"], edge["target"]), max(edge["source"], edge["target"]), edge["type"])
        seen = folded.get(key)
        if seen is None:
            folded[key] = {**edge, "source": key[0], "target": key[1], "both": False}
            result.append(folded[key])
        else:
            seen["both"] = True
            seen["count"] = max(seen["count"], edge["count"])
            seen["weight"] = max(seen["weight"], edge["weight"])
            seen["confidence"] = max(seen["confidence"], edge["confidence"])
    return result


def _cap_edges(edges: list[dict[str, Any]], limit: int) -> tuple[list[dict[str, Any]], bool]:
    """At most `limit` edges, what a person looks for first; every node keeps its best edge before any node
    gets a second, so a cut never leaves a node floating."""
    if len(edges) <= limit:
        return edges, False
    ordered = sorted(edges, key=lambda e: (_CLASS_PRIORITY[e["class"]], -e["weight"], e["id"]))
    first: dict[str, dict[str, Any]] = {}
    covered: set[int] = set()
    for edge in ordered:
        if edge["source"] not in covered or edge["target"] not in covered:
            first[edge["id"]] = edge
            covered.update((edge["source"], edge["target"]))
    if len(first) > limit:
        return ordered[:limit], True
    rest = [e for e in ordered if e["id"] not in first][: limit - len(first)]
    return list(first.values()) + rest, True


def _drop_isolated_memories(
    nodes: dict[int, dict[str, Any]], edges: list[dict[str, Any]], *, keep: set[int]
) -> None:
    """A memory left without a drawn edge is represented by its hubs' counts, not drawn floating."""
    touched = {e["source"] for e in edges} | {e["target"] for e in edges}
    for node_id in [i for i, n in nodes.items() if n["type"] == "memory" and i not in touched | keep]:
        del nodes[node_id]


# --- the top view -------------------------------------------------------------------------------------------

_PAIRS_SQL = """
SELECT DISTINCT least(e.from_node_id, e.to_node_id), greatest(e.from_node_id, e.to_node_id)
FROM graph_edges e
WHERE e.workspace_id = %(ws)s AND {conditions} AND e.from_node_id <> e.to_node_id
"""

# Edges that say something a person looks for first: relationships between memories, facts between entities.
_TELLING_SQL = """
SELECT DISTINCT n FROM (
    SELECT e.from_node_id AS n FROM graph_edges e
    WHERE e.workspace_id = %(ws)s AND {conditions} AND e.origin = ANY(%(telling)s)
    UNION ALL
    SELECT e.to_node_id FROM graph_edges e
    WHERE e.workspace_id = %(ws)s AND {conditions} AND e.origin = ANY(%(telling)s)
) t ORDER BY n LIMIT %(limit)s
"""
TELLING_ORIGINS = ["llm_pairwise", "llm_semantic", "llm_entity", "manual", "consolidation"]


def graph_top(*, workspace_id: int, filters: GraphFilters, node_limit: int, edge_limit: int) -> GraphView:
    """The best-connected nodes (distinct neighbours through edges and memory links that pass the filters)
    and the edges among them, parallel edges aggregated, hubs capped. Up to a third of the view goes first to
    the nodes of relationships and facts, however few neighbours they have."""
    params: dict[str, Any] = {"ws": workspace_id}
    conditions = _edge_conditions(filters, params)
    links = _links(workspace_id=workspace_id, filters=filters)
    pairs = {(a, b) for a, b in _rows(_PAIRS_SQL.format(conditions=conditions), params)}
    pairs.update((min(m, n), max(m, n)) for m, n, _ in links if m != n)
    degree: Counter[int] = Counter()
    for a, b in pairs:
        degree[a] += 1
        degree[b] += 1
    if not degree:
        if filters.narrows_edges:
            return GraphView()
        # A graph without edges yet still has nodes worth seeing.
        chosen = GraphNode.objects.filter(workspace_id=workspace_id)
        if filters.node_types:
            chosen = chosen.filter(node_type__in=filters.node_types)
        ids = list(chosen.order_by("-mention_count", "id").values_list("id", flat=True)[:node_limit])
        nodes = _nodes(workspace_id=workspace_id, node_ids=ids)
        return GraphView(nodes=[nodes[i] for i in ids if i in nodes])
    telling = [
        row[0]
        for row in _rows(
            _TELLING_SQL.format(conditions=conditions),
            {**params, "telling": TELLING_ORIGINS, "limit": node_limit // 3},
        )
    ]
    ranked = sorted(degree, key=lambda n: (-degree[n], n))
    ids = list(dict.fromkeys([n for n in telling if n in degree] + ranked))[:node_limit]
    truncated = len(degree) > node_limit
    nodes = _nodes(workspace_id=workspace_id, node_ids=ids)
    for node_id, node in nodes.items():
        node["degree"] = degree[node_id]
    edges = _edges_among(workspace_id=workspace_id, filters=filters, node_ids=ids, links=links)
    edges = _cap_hubs(nodes, edges, keep=set(), rank=degree)
    edges = _cap_cooccurrence(edges, keep=set())
    if len(ids) > BIG_VIEW:
        edges = _cap_similarity(edges, per_node=SIMILAR_PER_NODE_BIG)
    edges, cut = _cap_edges(edges, edge_limit)
    _drop_isolated_memories(nodes, edges, keep=set())
    return GraphView(nodes=[nodes[i] for i in ids if i in nodes], edges=edges, truncated=truncated or cut)


# --- a node's 1-hop view ------------------------------------------------------------------------------------


def graph_ego(
    *,
    workspace_id: int,
    node: GraphNode,
    filters: GraphFilters,
    edge_limit: int,
    offset: int = 0,
) -> GraphView:
    """A node, its neighbours through edges and memory links (a hub's memories a page at a time, newest
    first), and the edges among all of them."""
    params: dict[str, Any] = {"ws": workspace_id, "focus": node.id}
    edge_rows = _rows(
        _AGGREGATE_EDGES.format(
            conditions=_edge_conditions(filters, params),
            where="(e.from_node_id = %(focus)s OR e.to_node_id = %(focus)s)",
        )
        + " ORDER BY 5 DESC, 7 LIMIT %(edge_cap)s",
        {**params, "edge_cap": edge_limit + 1},
    )
    truncated = len(edge_rows) > edge_limit
    neighbours = {node.id}
    for row in edge_rows[:edge_limit]:
        neighbours.update((row[0], row[1]))
    more = None
    if node.node_type == "memory":
        focus_memory = _uuid(node.node_key)
        own = _links(
            workspace_id=workspace_id, filters=filters, memory_ids=[focus_memory] if focus_memory else []
        )
        neighbours.update(n for _, n, _ in own)
    elif _link_roles(filters):
        # Rules first, then decisions and facts, each newest first: what a person asks of a repo or a topic
        # before its notes.
        page = _rows(
            "SELECT l.memory_id, count(*) OVER () FROM memory_node_links l"
            " JOIN memories m ON m.workspace_id = l.workspace_id AND m.id = l.memory_id"
            " WHERE l.workspace_id = %(ws)s AND m.workspace_id = %(ws)s AND l.node_id = %(focus)s"
            " AND l.role = ANY(%(roles)s)"
            " ORDER BY CASE m.type WHEN 'rule' THEN 0 WHEN 'decision' THEN 1 WHEN 'fact' THEN 2 ELSE 3 END,"
            " l.id DESC OFFSET %(offset)s LIMIT %(page)s",
            {**params, "roles": _link_roles(filters), "offset": offset, "page": EGO_MEMORIES},
        )
        neighbours.update(_memory_nodes(workspace_id, [row[0] for row in page]).values())
        total = int(page[0][1]) if page else 0
        rest = total - offset - len(page)
        if rest > 0:
            more = {"count": rest, "offset": offset + len(page)}
    ids = sorted(neighbours)
    nodes = _nodes(workspace_id=workspace_id, node_ids=ids)
    memory_ids = [m for m in (_uuid(n["key"]) for n in nodes.values() if n["type"] == "memory") if m]
    links = _links(workspace_id=workspace_id, filters=filters, memory_ids=memory_ids)
    edges = _edges_among(workspace_id=workspace_id, filters=filters, node_ids=ids, links=links)
    edges = [e for e in edges if e["source"] in nodes and e["target"] in nodes]
    rank = {i: (2 if n["type"] != "memory" else 1) for i, n in nodes.items()}
    edges = _cap_hubs(nodes, edges, keep={node.id}, rank=rank)
    edges = _cap_cooccurrence(edges, keep={node.id})
    edges, cut = _cap_edges(edges, edge_limit)
    focus = nodes.get(node.id) or _nodes(workspace_id=workspace_id, node_ids=[node.id])[node.id]
    focus["degree"] = len(neighbours) - 1
    ordered = [focus] + [nodes[i] for i in ids if i != node.id and i in nodes]
    return GraphView(nodes=ordered, edges=edges, truncated=truncated or cut, focus=focus, more=more)


# --- the pair panel and edges -------------------------------------------------------------------------------


def graph_pair(*, workspace_id: int, a: GraphNode, b: GraphNode, limit: int) -> dict[str, Any]:
    """Everything between two nodes, both directions: active edges (with their evidence and the model's
    explanation) and the memory link when one of them is a memory."""
    edges = list(
        GraphEdge.objects.select_related("from_node", "to_node")
        .filter(workspace_id=workspace_id, expired_at__isnull=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=Now()))
        .filter(from_node_id__in=(a.id, b.id), to_node_id__in=(a.id, b.id))
        .exclude(from_node_id=F("to_node_id"))
        .order_by("edge_type", "-confidence", "id")[:limit]
    )
    links = []
    for memory, other in ((a, b), (b, a)):
        memory_id = _uuid(memory.node_key) if memory.node_type == "memory" else None
        if memory_id is None:
            continue
        for _, _, role in _links(
            workspace_id=workspace_id, filters=GraphFilters(), memory_ids=[memory_id], node_id=other.id
        ):
            links.append({"type": LINK_TYPES[role], "source": memory.id, "target": other.id})
    return {
        "edges": [{"edge": edge, "class": edge_class_of(edge.edge_type, edge.origin)} for edge in edges],
        "links": links,
    }


def graph_edge_get(*, workspace_id: int, edge_id: int) -> GraphEdge | None:
    return (
        GraphEdge.objects.select_related("from_node", "to_node")
        .filter(workspace_id=workspace_id, id=edge_id)
        .first()
    )


def graph_edge_types(*, workspace_id: int, limit: int) -> list[dict[str, str]]:
    """The edge types of the workspace with their class, and the memory-link types: the filter's choices."""
    rows = _rows(
        f"""
        SELECT e.edge_type, min(e.origin) FROM graph_edges e
        WHERE e.workspace_id = %(ws)s AND {_ACTIVE} GROUP BY 1 ORDER BY 1 LIMIT %(limit)s
        """,
        {"ws": workspace_id, "limit": limit},
    )
    found = [{"type": t, "class": edge_class_of(t, origin)} for t, origin in rows]
    roles = {
        role
        for (role,) in _rows(
            "SELECT DISTINCT role FROM memory_node_links"
            " WHERE workspace_id = %(ws)s AND role = ANY(%(roles)s)",
            {"ws": workspace_id, "roles": list(LINK_TYPES)},
        )
    }
    found += [{"type": LINK_TYPES[r], "class": STRUCTURAL} for r in LINK_TYPES if r in roles]
    return sorted(found, key=lambda e: (_CLASS_PRIORITY[e["class"]], e["type"]))


def graph_node_types(*, workspace_id: int, limit: int) -> list[str]:
    return list(
        GraphNode.objects.filter(workspace_id=workspace_id)
        .values_list("node_type", flat=True)
        .distinct()
        .order_by("node_type")[:limit]
    )


# --- find a node --------------------------------------------------------------------------------------------


def graph_node_find(*, workspace_id: int, query: str, limit: int) -> list[dict[str, Any]]:
    """Nodes whose label, key or (for entities) alias contains the words, exact matches first, then by how
    many memories they hold. Memory nodes are found through memory search instead."""
    text = " ".join(query.split())[:200]
    if not text:
        return []
    like = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = _rows(
        """
        SELECT n.id, n.node_type, n.node_key, n.label,
               (SELECT count(*) FROM memory_node_links m
                WHERE m.workspace_id = n.workspace_id AND m.node_id = n.id) AS memories,
               lower(n.label) = lower(%(text)s) OR lower(n.node_key) = lower(%(text)s) AS exact
        FROM graph_nodes n
        WHERE n.workspace_id = %(ws)s AND n.node_type <> 'memory'
          AND (n.label ILIKE %(like)s OR n.node_key ILIKE %(like)s
               OR (n.node_type = ANY(%(entities)s) AND EXISTS (
                   SELECT 1 FROM graph_entity_aliases a
                   WHERE a.workspace_id = n.workspace_id AND a.node_id = n.id AND a.alias ILIKE %(like)s)))
        ORDER BY exact DESC, memories DESC, n.label, n.id
        LIMIT %(limit)s
        """,
        {"ws": workspace_id, "text": text, "like": like, "entities": list(ENTITY_TYPES), "limit": limit},
    )
    return [
        {"id": r[0], "type": r[1], "key": r[2], "label": r[3] or r[2], "memories": int(r[4]), "exact": r[5]}
        for r in rows
    ]


def memory_nodes_for(*, workspace_id: int, memory_ids: list[uuid.UUID] | list[str]) -> dict[str, int]:
    """The node id of each memory's node (memory id as text → node id)."""
    if not memory_ids:
        return {}
    rows = _rows(
        "SELECT node_key, id FROM graph_nodes WHERE workspace_id = %(ws)s AND node_type = 'memory'"
        " AND node_key = ANY(%(keys)s)",
        {"ws": workspace_id, "keys": [str(m) for m in memory_ids]},
    )
    return {key: node_id for key, node_id in rows}


# --- how is A connected to B --------------------------------------------------------------------------------

# Shortest paths are searched breadth first from both ends; a level larger than this is cut (the busiest
# nodes first), so a path through a hub of every memory is still found without reading the whole graph.
PATH_LEVEL_CAP = 4000
PATH_MAX_HOPS = 6
PATH_DEFAULT_HOPS = 4
PATH_MAX_PATHS = 3
# Nodes a path never goes through: every memory has a type, so "both are notes" connects everything.
PATH_SKIPPED_TYPES = ("memory_type",)

LINK_SENTENCES = {
    "in_repo": "is in the repo",
    "tagged": "is tagged with",
    "in_category": "is in the category",
    "for_user": "is about the end user",
    "mentions_entity": "mentions",
}


def _step_rows(workspace_id: int, frontier: list[int]) -> list[tuple[int, int, str, int | None, str, int]]:
    """Every connection of the frontier nodes: (from, to, type, stored edge id or None, class, direction)
    where direction 1 means stored from → to, -1 the other way. Active edges and memory links alike."""
    params: dict[str, Any] = {"ws": workspace_id, "ids": frontier, "skip": list(PATH_SKIPPED_TYPES)}
    rows: list[tuple[int, int, str, int | None, str, int]] = []
    for a, b, edge_type, first_id, origin in _rows(
        f"""
        SELECT e.from_node_id, e.to_node_id, e.edge_type, min(e.id), min(e.origin) FROM graph_edges e
        WHERE e.workspace_id = %(ws)s AND {_ACTIVE} AND e.from_node_id <> e.to_node_id
          AND (e.from_node_id = ANY(%(ids)s) OR e.to_node_id = ANY(%(ids)s))
        GROUP BY 1, 2, 3
        """,
        params,
    ):
        rows.append((a, b, edge_type, first_id, edge_class_of(edge_type, origin), 1))
    # Memory links, both ways: a memory's own links, and the memories linked to a node.
    link_rows = _rows(
        """
        SELECT l.memory_id, l.node_id, l.role FROM memory_node_links l
        WHERE l.workspace_id = %(ws)s AND l.role = ANY(%(roles)s)
          AND (l.node_id = ANY(%(ids)s) OR l.memory_id IN (
              SELECT s.memory_id FROM memory_node_links s
              WHERE s.workspace_id = %(ws)s AND s.role = 'self' AND s.node_id = ANY(%(ids)s)))
        """,
        {**params, "roles": list(LINK_TYPES)},
    )
    selves = _memory_nodes(workspace_id, list({row[0] for row in link_rows}))
    for memory_id, node_id, role in link_rows:
        memory_node = selves.get(memory_id)
        if memory_node is not None and memory_node != node_id:
            rows.append((memory_node, node_id, LINK_TYPES[role], None, STRUCTURAL, 1))
    return rows


def _skipped(workspace_id: int, node_ids: set[int]) -> set[int]:
    if not node_ids:
        return set()
    return {
        row[0]
        for row in _rows(
            "SELECT id FROM graph_nodes WHERE workspace_id = %(ws)s AND id = ANY(%(ids)s)"
            " AND node_type = ANY(%(skip)s)",
            {"ws": workspace_id, "ids": list(node_ids), "skip": list(PATH_SKIPPED_TYPES)},
        )
    }


def graph_paths(*, workspace_id: int, a: GraphNode, b: GraphNode, max_hops: int) -> dict[str, Any]:
    """The shortest paths (up to PATH_MAX_PATHS) between two nodes through stored edges and memory links,
    each step typed and explained in words; {"paths": []} when none is within max_hops."""
    if a.id == b.id:
        return {"hops": 0, "paths": [], "nodes": [], "steps": []}
    # Breadth first from a, remembering every parent on a shortest route (so several paths come out).
    parents: dict[int, list[tuple[int, tuple[int, int, str, int | None, str, int]]]] = {a.id: []}
    frontier = [a.id]
    found = False
    hops = 0
    while frontier and hops < max_hops and not found:
        hops += 1
        rows = _step_rows(workspace_id, frontier)
        in_frontier = set(frontier)
        fresh: dict[int, list[tuple[int, tuple[int, int, str, int | None, str, int]]]] = {}
        for row in rows:
            source, target = row[0], row[1]
            for here, there, direction in ((source, target, 1), (target, source, -1)):
                if here in in_frontier and there not in parents:
                    fresh.setdefault(there, []).append((here, (*row[:5], direction)))
        fresh_ids = set(fresh)
        for node_id in _skipped(workspace_id, fresh_ids - {b.id}):
            del fresh[node_id]
        parents.update(fresh)
        found = b.id in fresh
        # The busiest nodes are kept when a level is too wide: they are where paths meet.
        frontier = sorted(fresh, key=lambda n: -len(fresh[n]))[:PATH_LEVEL_CAP]
    if not found:
        return {"hops": None, "paths": [], "nodes": [], "steps": []}
    # Walk back from b along parents; de-duplicate (the same pair of nodes by several types is one step).
    paths: list[list[tuple[int, tuple[int, int, str, int | None, str, int]]]] = []

    def walk(node_id: int, tail: list[tuple[int, tuple[int, int, str, int | None, str, int]]]) -> None:
        if len(paths) >= PATH_MAX_PATHS:
            return
        if node_id == a.id:
            paths.append(list(reversed(tail)))
            return
        seen_parents: set[int] = set()
        for parent, row in parents[node_id]:
            if parent in seen_parents:
                continue
            seen_parents.add(parent)
            walk(parent, [*tail, (node_id, row)])

    walk(b.id, [])
    node_ids = sorted({a.id} | {n for path in paths for n, _ in path})
    nodes = _nodes(workspace_id=workspace_id, node_ids=node_ids)
    result_paths = []
    for path in paths:
        steps = []
        previous = a.id
        for node_id, (source, target, edge_type, edge_id, edge_class, _direction) in path:
            steps.append(
                {
                    "from": previous,
                    "to": node_id,
                    "source": source,
                    "target": target,
                    "type": edge_type,
                    "edgeId": edge_id,
                    "class": edge_class,
                    "text": _step_text(nodes, source, target, edge_type),
                }
            )
            previous = node_id
        result_paths.append({"nodes": [a.id, *[n for n, _ in path]], "steps": steps})
    return {"hops": hops, "paths": result_paths, "nodes": [nodes[i] for i in node_ids if i in nodes]}


def _step_text(nodes: dict[int, dict[str, Any]], source: int, target: int, edge_type: str) -> str:
    def name(node_id: int) -> str:
        node = nodes.get(node_id) or {"label": "?", "type": "node"}
        label = str(node["label"])
        label = label if len(label) <= 90 else label[:87] + "..."
        return f"the memory “{label}”" if node["type"] == "memory" else f"{node['type']} “{label}”"

    sentence = LINK_SENTENCES.get(edge_type)
    if sentence:
        return f"{name(source)} {sentence} {name(target).split(' ', 1)[-1]}"
    return f"{name(source)} {edge_type.replace('_', ' ')} {name(target)}"
