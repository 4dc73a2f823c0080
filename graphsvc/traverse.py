"""graph/traverse: walk the entity graph from one entity along typed edges, with the path to each node.

Undirected like fact recall (a fact "A uses B" links B back to A) unless a direction is asked for. Two
statements whatever the graph's size and max_hops: the start entity's lookup (which brings the decay settings
along) and one statement that walks every hop, ranks the reached nodes, returns the chosen ones with their
paths and counts the path facts as retrieved. A node's score is the product of the effective confidences
along its path: the chance the whole chain still holds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from config.errors import ApiError
from config.prepared import prepared_cursor
from graphsvc.facts import (
    DIRECTIONS,
    LAZY_COMMIT_SQL,
    MAX_FANOUT,
    audience_for,
    boosted_sql,
    edge_types_normalised,
    entity_lookup_stored,
    entity_not_found,
    neighbours_sql,
    reading_for,
)
from memories.prompt_text import prompt_line

MAX_HOPS = 3
MAX_LIMIT = 100
# Nodes one hop keeps, best scores first: the next hop expands at most this many (a 3-hop walk from a hub
# would otherwise reach most of a dense graph).
MAX_FRONTIER = 500


def _hop_sql(hop: int, where: str, confidence: str, direction: str = "both") -> str:
    """h<hop>: each node reached first at this hop with its best path (score, parent, edge; ties: the smaller
    fact id), the MAX_FRONTIER best of them; r<hop>: all reached so far. Every frontier node offers its
    MAX_FANOUT most confident facts."""
    frontier = "r0" if hop == 1 else f"h{hop - 1}"
    seen = f"r{hop - 1}"
    neighbours = neighbours_sql(
        direction=direction,
        out=f"SELECT e.id, e.to_node_id AS there, {confidence} AS confidence FROM graph_edges e "
        f"WHERE {where} AND e.from_node_id = f.node",
        incoming=f"SELECT e.id, e.from_node_id AS there, {confidence} AS confidence FROM graph_edges e "
        f"WHERE {where} AND e.to_node_id = f.node",
    )
    return f"""
    h{hop} AS (
        SELECT * FROM (
            SELECT DISTINCT ON (x.there) x.there AS node, {hop} AS hop, f.score * x.confidence AS score,
                   f.node AS parent, x.id AS edge
            FROM {frontier} f CROSS JOIN LATERAL (
                SELECT n.id, n.there, n.confidence FROM (
                {neighbours}
                ) n
                ORDER BY n.confidence DESC, n.id LIMIT %(fanout)s
            ) x
            WHERE NOT EXISTS (SELECT 1 FROM {seen} p WHERE p.node = x.there)
            ORDER BY x.there, f.score * x.confidence DESC, x.id
        ) best
        ORDER BY best.score DESC, best.node LIMIT %(frontier)s
    ),
    r{hop} AS (SELECT * FROM {seen} UNION ALL SELECT * FROM h{hop})"""


def graph_traverse(
    *,
    workspace_id: int,
    scope: Any = None,
    start_entity: str,
    edge_types: list[str] | None = None,
    max_hops: int = 2,
    limit: int = 20,
    at: datetime | None = None,
    direction: str = "both",
    lazy_commit: bool = False,
) -> dict[str, Any]:
    """`edge_types` are normalised like stored relations ("works on" → works_on); `direction` follows facts
    out of each node (source → target), into it, or both. An unknown start answers 404 ENTITY_NOT_FOUND with
    the closest names the caller may see. `lazy_commit`: the caller's transaction holds nothing but this walk
    (see facts.LAZY_COMMIT_SQL)."""
    if direction not in DIRECTIONS:
        raise ApiError(400, "INVALID_REQUEST", f"direction must be one of {', '.join(DIRECTIONS)}.")
    if not 1 <= max_hops <= MAX_HOPS:
        raise ApiError(400, "INVALID_REQUEST", f"maxHops must be 1-{MAX_HOPS}; got {max_hops}.")
    if not 1 <= limit <= MAX_LIMIT:
        raise ApiError(400, "INVALID_REQUEST", f"limit must be 1-{MAX_LIMIT}; got {limit}.")
    audience = audience_for(scope)
    start, stored = entity_lookup_stored(workspace_id=workspace_id, name=start_entity, audience=audience)
    if start is None:
        raise entity_not_found(workspace_id=workspace_id, name=start_entity, audience=audience)
    reading = reading_for(
        workspace_id=workspace_id,
        at=at,
        edge_types=edge_types_normalised(edge_types),
        stored=stored,
        audience=audience,
        direction=direction,
    )
    where = reading.where()
    confidence = boosted_sql(reading.decayed(), "e.retrieval_count")
    hops = "".join("," + _hop_sql(hop, where, confidence, direction) for hop in range(1, max_hops + 1))
    # The facts on the chosen nodes' paths count as retrieved (a reading of the present only), in the same
    # statement; the scores above were computed from the counts before it.
    bump = (
        """,
    bump AS (
        UPDATE graph_edges g SET retrieval_count = g.retrieval_count + 1, last_retrieved_at = now()
        WHERE g.workspace_id = %(ws)s AND g.id IN (SELECT edge FROM lineage WHERE edge IS NOT NULL)
    )"""
        if at is None
        else ""
    )
    lazy = f", {LAZY_COMMIT_SQL} AS lazy" if at is None and lazy_commit else ""
    sql = f"""
    WITH RECURSIVE r0 AS (
        SELECT %(start)s::bigint AS node, 0 AS hop, 1.0::float8 AS score, NULL::bigint AS parent,
               NULL::bigint AS edge
    ){hops},
    chosen AS (
        SELECT node FROM r{max_hops} WHERE hop > 0 ORDER BY score DESC, hop, node LIMIT %(limit)s
    ),
    lineage AS (
        SELECT r.* FROM r{max_hops} r JOIN chosen c ON c.node = r.node
        UNION
        SELECT r.* FROM r{max_hops} r JOIN lineage l ON r.node = l.parent
    ){bump}
    SELECT l.node, l.hop, l.score, l.parent, l.node IN (SELECT node FROM chosen), nd.label,
           g.id, s.label, g.edge_type, t.label, g.fact, g.edge_class,
           {boosted_sql(reading.decayed("g"), "g.retrieval_count")}{lazy}
    FROM lineage l
    JOIN graph_nodes nd ON nd.workspace_id = %(ws)s AND nd.id = l.node
    LEFT JOIN graph_edges g ON g.workspace_id = %(ws)s AND g.id = l.edge
    LEFT JOIN graph_nodes s ON s.workspace_id = %(ws)s AND s.id = g.from_node_id
    LEFT JOIN graph_nodes t ON t.workspace_id = %(ws)s AND t.id = g.to_node_id
    """
    with prepared_cursor() as cursor:
        cursor.execute(
            sql, reading.params(start=start.node_id, fanout=MAX_FANOUT, frontier=MAX_FRONTIER, limit=limit)
        )
        rows = cursor.fetchall()
    # node → (hop, score, parent, edge that reached it)
    reached: dict[int, tuple[int, float, int | None, dict[str, Any] | None]] = {}
    names = {start.node_id: start.name}
    chosen = []
    for (
        node_id,
        hop,
        score,
        parent,
        is_chosen,
        name,
        edge_id,
        source,
        relation,
        target,
        fact,
        edge_class,
        edge_confidence,
        *_,
    ) in rows:
        names[node_id] = name
        edge = (
            None
            if edge_id is None
            else {
                "id": edge_id,
                "source": source,
                "relation": relation,
                "target": target,
                "fact": fact,
                "edgeClass": edge_class,
                "confidence": float(edge_confidence),
            }
        )
        reached[node_id] = (hop, float(score), parent, edge)
        if is_chosen:
            chosen.append(node_id)
    chosen.sort(key=lambda n: (-reached[n][1], reached[n][0], n))
    nodes, edges, used = [], [], {}
    for node_id in chosen:
        hop, score, _, _ = reached[node_id]
        path, step = [], node_id
        while step in reached and (edge := reached[step][3]) is not None:
            path.append(
                {
                    "source": prompt_line(edge["source"]),
                    "relation": edge["relation"],
                    "target": prompt_line(edge["target"]),
                }
            )
            used[edge["id"]] = edge
            step = reached[step][2]
        path.reverse()
        nodes.append(
            {
                "id": str(node_id),
                "name": prompt_line(names.get(node_id, "")),
                "hop": hop,
                "score": round(score, 6),
                "path": path,
            }
        )
    for edge in sorted(used.values(), key=lambda e: e["id"]):
        edges.append(
            {
                "source": prompt_line(edge["source"]),
                "relation": edge["relation"],
                "target": prompt_line(edge["target"]),
                "confidence": round(edge["confidence"], 4),
                "fact": prompt_line(edge["fact"]),
                "edgeClass": edge["edgeClass"],
            }
        )
    return {
        "start": {"id": str(start.node_id), "name": prompt_line(start.name)},
        "nodes": nodes,
        "edges": edges,
    }
