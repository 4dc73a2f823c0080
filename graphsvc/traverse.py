"""graph/traverse (seed 002): walk the entity graph from one entity along typed edges, with the path to each node.

Undirected like fact recall (a fact "A uses B" links B back to A) and one query per hop whatever the graph's size
(plus the start entity's lookup, the decay settings and the retrieval count update). A node's score is the product of the
effective confidences along its path: the chance the whole chain still holds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connections

from config.errors import ApiError
from graphsvc.facts import (
    EDGE_COLUMNS,
    _edge_row,
    clean_fact_text,
    entity_lookup,
    reading_for,
    retrievals_record,
)

MAX_HOPS = 3
MAX_LIMIT = 100


def graph_traverse(
    *,
    workspace_id: int,
    scope: Any = None,
    start_entity: str,
    edge_types: list[str] | None = None,
    max_hops: int = 2,
    limit: int = 20,
    at: datetime | None = None,
) -> dict[str, Any]:
    if not 1 <= max_hops <= MAX_HOPS:
        raise ApiError(400, "INVALID_REQUEST", f"maxHops must be 1-{MAX_HOPS}; got {max_hops}.")
    if not 1 <= limit <= MAX_LIMIT:
        raise ApiError(400, "INVALID_REQUEST", f"limit must be 1-{MAX_LIMIT}; got {limit}.")
    start = entity_lookup(workspace_id=workspace_id, name=start_entity)
    if start is None:
        raise ApiError(404, "ENTITY_NOT_FOUND", f"No entity named {start_entity!r} in this workspace; "
                       "graph/entities with a query lists the names it knows.")
    reading = reading_for(workspace_id=workspace_id, at=at, edge_types=[t.strip().lower() for t in edge_types or []])
    where = reading.where()
    # node → (hop, score, parent node, edge that reached it)
    reached: dict[int, tuple[int, float, int | None, dict[str, Any] | None]] = {start.node_id: (0, 1.0, None, None)}
    names = {start.node_id: start.name}
    frontier = [start.node_id]
    with connections["app"].cursor() as cursor:
        for hop in range(max_hops):
            if not frontier:
                break
            cursor.execute(
                f"""
                SELECT {EDGE_COLUMNS.format(decayed=reading.decayed())}
                FROM graph_edges e JOIN graph_nodes s ON s.id = e.from_node_id JOIN graph_nodes t ON t.id = e.to_node_id
                WHERE {where} AND e.from_node_id = ANY(%(f)s)
                UNION ALL
                SELECT {EDGE_COLUMNS.format(decayed=reading.decayed())}
                FROM graph_edges e JOIN graph_nodes s ON s.id = e.from_node_id JOIN graph_nodes t ON t.id = e.to_node_id
                WHERE {where} AND e.to_node_id = ANY(%(f)s) AND NOT (e.from_node_id = ANY(%(f)s))
                ORDER BY 1 LIMIT 5000
                """,
                reading.params(f=frontier),
            )
            in_frontier = set(frontier)
            best: dict[int, tuple[float, int, dict[str, Any]]] = {}
            for edge in (_edge_row(row) for row in cursor.fetchall()):
                names[edge["sourceId"]], names[edge["targetId"]] = edge["source"], edge["target"]
                for here, there in ((edge["sourceId"], edge["targetId"]), (edge["targetId"], edge["sourceId"])):
                    if here not in in_frontier or there in reached:
                        continue
                    score = reached[here][1] * edge["confidence"]
                    if there not in best or score > best[there][0]:
                        best[there] = (score, here, edge)
            frontier = []
            for node_id, (score, parent, edge) in best.items():
                reached[node_id] = (hop + 1, score, parent, edge)
                frontier.append(node_id)
    ranked = sorted((n for n in reached if n != start.node_id), key=lambda n: (-reached[n][1], reached[n][0], n))
    chosen = ranked[:limit]
    nodes, edges, used = [], [], {}
    for node_id in chosen:
        hop, score, _, _ = reached[node_id]
        path, step = [], node_id
        while reached[step][3] is not None:
            edge = reached[step][3]
            path.append({"source": clean_fact_text(edge["source"]), "relation": edge["relation"],
                         "target": clean_fact_text(edge["target"])})
            used[edge["id"]] = edge
            step = reached[step][2]
        path.reverse()
        nodes.append({"id": str(node_id), "name": clean_fact_text(names.get(node_id, "")), "hop": hop,
                      "score": round(score, 6), "path": path})
    for edge in sorted(used.values(), key=lambda e: e["id"]):
        edges.append({"source": clean_fact_text(edge["source"]), "relation": edge["relation"],
                      "target": clean_fact_text(edge["target"]), "confidence": round(edge["confidence"], 4),
                      "fact": clean_fact_text(edge["fact"]), "edgeClass": edge["edgeClass"]})
    if at is None:
        retrievals_record(workspace_id=workspace_id, edge_ids=sorted(used))
    return {
        "start": {"id": str(start.node_id), "name": clean_fact_text(start.name)},
        "nodes": nodes,
        "edges": edges,
    }
