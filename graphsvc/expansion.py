"""Graph expansion for context/get, with provenance for every memory it adds.

Seeds are the baseline memories; the nodes they link to are hop 0; breadth-first over active edges,
undirected. Improvements on memories.sh:
- no arbitrary LIMIT at hubs: each frontier node keeps its best `EDGE_FANOUT` edges by score among its
  `EDGE_READ_CAP` heaviest (read in weight order from an index, so a hub with 100k edges costs a bounded
  read), and each traversed node contributes at most `LINK_FANOUT` linked memories (the newest), so a type or
  topic node linked to 100k memories costs a bounded, indexed read instead of truncating somewhere random;
- type nodes (memory_type:note …) are not hop-0 nodes: sharing a type is not a relation;
- the score the final order uses includes the edge weight, as memories.sh's docs say
  (type weight × edge weight × confidence / max(1, hop)).
One query, whatever the graph's size and the depth.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass
from typing import Any

from config.prepared import prepared_cursor

EDGE_TYPE_WEIGHTS = {
    "caused_by": 1.5,
    "contradicts": 1.3,
    "supersedes": 1.2,
    "similar_to": 1.0,
    "depends_on": 0.9,
    "prefers_over": 0.8,
    "specializes": 0.7,
    "conditional_on": 0.6,
    "shared_node": 0.25,
}
DEFAULT_EDGE_WEIGHT = 0.5
EDGE_FANOUT = 50
LINK_FANOUT = 25
# Edges read per frontier node and direction, heaviest first (an index in that order, migration 0014): a user
# or repo node gets a mapping edge per memory written (100k for a busy user), and reading all of them on every
# call made expansion cost grow with the workspace. A node with fewer edges than this is ranked exactly as
# before.
EDGE_READ_CAP = 500

_TYPE_WEIGHT_SQL = (
    "CASE e.edge_type "
    + " ".join(f"WHEN '{name}' THEN {weight}" for name, weight in EDGE_TYPE_WEIGHTS.items())
    + f" ELSE {DEFAULT_EDGE_WEIGHT} END"
)


@dataclass(frozen=True)
class Reason:
    """Why a node (and through it, a memory) was reached."""

    node_ref: str  # "<node_type>:<node_key>" the memory was reached through
    edge_type: str
    hop: int
    confidence: float
    score: float
    seed_memory_id: str

    def payload(self) -> dict[str, object]:
        return {
            "whyIncluded": "graph_expansion",
            "linkedViaNode": self.node_ref,
            "edgeType": self.edge_type,
            "hopCount": self.hop,
            "confidence": round(self.confidence, 4),
            "seedMemoryId": self.seed_memory_id,
        }


@dataclass
class Expansion:
    memory_ids: list[uuid.UUID]
    reasons: dict[uuid.UUID, Reason]
    total_candidates: int


def type_weight(edge_type: str) -> float:
    return EDGE_TYPE_WEIGHTS.get(edge_type, DEFAULT_EDGE_WEIGHT)


# One statement for the whole traversal, which also does its bookkeeping: hop 0, each hop's best edges per
# frontier node, the best reason of every node reached, the newest memories linked to each of those nodes, the
# best reason of every memory and finally the best `limit` memories, labelled. Only those rows leave the
# server (a depth-2 traversal reads ~1,000 edges and ~1,000 links; shipping them and replaying the
# breadth-first bookkeeping in Python cost more than the traversal itself).
#
# Breadth-first rules, as SQL:
# - a node's reason comes from the first hop that reached it (reach{k} leaves out what seen{k-1} holds);
#   within a hop the best score wins, then the smaller edge id (ties are decided, so the answer is stable);
# - a hop-0 node is reached through its first link (links in id order) and keeps that seed;
# - a node reached at hop k carries the seed of the node it was reached from, whose reason hop k - 1 decided;
# - each frontier node reads its edges in its own index scan (a LATERAL subquery per direction, heaviest
#   first, at most EDGE_READ_CAP), whatever the planner guesses the frontier's size to be.
_HOP0_SQL = """
hop0 AS (
    SELECT l.node_id, n.node_type || ':' || n.node_key AS ref, l.memory_id AS seed, l.id AS ord
    FROM memory_node_links l JOIN graph_nodes n ON n.id = l.node_id AND n.workspace_id = l.workspace_id
    WHERE l.workspace_id = %(ws)s AND l.memory_id = ANY(%(seeds)s) AND n.node_type <> 'memory_type'
), seen0 AS (SELECT DISTINCT node_id FROM hop0),
reach0 AS (SELECT DISTINCT ON (node_id) node_id, ref, seed FROM hop0 ORDER BY node_id, ord)"""

_HOP_SQL = """
hop{k} AS (
    SELECT ranked.via, ranked.neighbour, ranked.edge_type, ranked.confidence, ranked.score, ranked.edge_id
    FROM (
        SELECT s.via, s.neighbour, s.edge_type, s.confidence, s.score, s.edge_id,
               row_number() OVER (PARTITION BY s.via ORDER BY s.score DESC, s.edge_id) AS rank
        FROM frontier{k} f CROSS JOIN LATERAL (
            (SELECT f.node_id AS via, e.to_node_id AS neighbour, e.edge_type,
                    least(1, greatest(0, e.confidence)) AS confidence, e.id AS edge_id,
                    {weight} * e.weight * least(1, greatest(0, e.confidence)) AS score
             FROM graph_edges e
             WHERE e.workspace_id = %(ws)s AND e.from_node_id = f.node_id
               AND e.expired_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > now())
             ORDER BY e.weight DESC, e.id
             LIMIT %(read_cap)s)
            UNION ALL
            (SELECT f.node_id, e.from_node_id, e.edge_type, least(1, greatest(0, e.confidence)), e.id,
                    {weight} * e.weight * least(1, greatest(0, e.confidence))
             FROM graph_edges e
             WHERE e.workspace_id = %(ws)s AND e.to_node_id = f.node_id
               AND e.expired_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > now())
             ORDER BY e.weight DESC, e.id
             LIMIT %(read_cap)s)
        ) s
    ) ranked
    WHERE ranked.rank <= %(fanout)s
), seen{k} AS (SELECT node_id FROM seen{prev} UNION SELECT neighbour FROM hop{k}),
reach{k} AS (
    SELECT DISTINCT ON (h.neighbour) h.neighbour AS node_id, h.edge_type, h.confidence,
           h.score / {k} AS score, r.seed
    FROM hop{k} h JOIN reach{prev} r ON r.node_id = h.via
    WHERE NOT EXISTS (SELECT 1 FROM seen{prev} s WHERE s.node_id = h.neighbour)
    ORDER BY h.neighbour, h.score DESC, h.edge_id
)"""

# `reasons` holds every node reached, once (each reach{k} leaves out the nodes of earlier hops).
# A memory linked to a hop-0 node shares that node with the seed (a tag, repo, topic …): shared_node, counted
# as hop 1. One linked to a node reached through an edge takes that node's reason. The best reason per memory:
# the lowest hop, then the best score, then the lower node id.
_LINKS_SQL = """,
reasons AS (
    SELECT 0 AS hop, node_id, ref, 'shared_node'::text AS edge_type, 1.0::float8 AS confidence,
           {shared}::float8 AS score, seed FROM reach0
    {hops}
), linked AS (
    SELECT DISTINCT ON (l.memory_id) l.memory_id, r.hop, r.node_id, r.ref, r.edge_type, r.confidence, r.score,
           r.seed
    FROM reasons r CROSS JOIN LATERAL (
        SELECT memory_id FROM memory_node_links
        WHERE workspace_id = %(ws)s AND node_id = r.node_id AND memory_id <> ALL(%(seeds)s)
        ORDER BY id DESC
        LIMIT %(links)s
    ) l
    ORDER BY l.memory_id, greatest(r.hop, 1), r.score DESC, r.node_id
), {best}
"""
# The best `limit` candidates a caller may read (its condition on memories m), labelled and loaded with their
# columns, so no reload follows and an unreadable memory takes no slot. The candidates are walked best first
# and looked up one by one until the limit is filled (an incremental sort: ties on score and hop go to the
# newer memory), so a depth-2 traversal with ~500 candidates reads a dozen memories, not all of them. The
# LIMIT 1 (an id finds one memory) keeps the planner from turning the lookup into a join it may plan as a hash
# of the workspace's memories when it expects many candidates. graph_total counts every candidate.
_BEST_READABLE_SQL = """best AS (
    SELECT {columns}, c.*
    FROM (SELECT linked.*, count(*) OVER () AS total FROM linked ORDER BY score DESC, greatest(hop, 1)) c
    CROSS JOIN LATERAL (SELECT {columns} FROM memories m WHERE m.id = c.memory_id AND {condition} LIMIT 1) m
    ORDER BY c.score DESC, greatest(c.hop, 1), m.updated_at DESC, m.id
    LIMIT %(limit)s
)
SELECT {best_columns}, greatest(b.hop, 1) AS graph_hop,
       coalesce(b.ref, n.node_type || ':' || n.node_key) AS graph_ref, b.edge_type AS graph_edge_type,
       b.confidence AS graph_confidence, b.score AS graph_score, b.seed AS graph_seed, b.total AS graph_total
FROM best b LEFT JOIN graph_nodes n ON b.ref IS NULL AND n.workspace_id = %(ws)s AND n.id = b.node_id
ORDER BY b.score DESC, greatest(b.hop, 1), b.updated_at DESC, b.id
"""


def _expansion_sql(depth: int, *, best: str) -> str:
    ctes = [_HOP0_SQL]
    for k in range(1, depth + 1):
        # Hop 1 starts from every hop-0 node; hop k > 1 from the nodes hop k - 1 reached first.
        frontier = (
            f"frontier{k} AS (SELECT node_id FROM seen0)"
            if k == 1
            else f"frontier{k} AS (SELECT node_id FROM reach{k - 1})"
        )
        ctes.append(frontier + "," + _HOP_SQL.format(k=k, prev=k - 1, weight=_TYPE_WEIGHT_SQL))
    hops = "".join(
        f"UNION ALL SELECT {k}, node_id, NULL, edge_type, confidence, score, seed FROM reach{k}\n"
        for k in range(1, depth + 1)
    )
    links = _LINKS_SQL.format(hops=hops, shared=repr(float(type_weight("shared_node"))), best=best)
    return "WITH " + ",".join(ctes) + links


@functools.lru_cache(maxsize=256)
def readable_expansion_sql(*, depth: int, columns: str, condition: str) -> str:
    """The expansion statement that returns the best `%(limit)s` memories the caller may read, as `columns` (a
    list of `m.<column>`) followed by graph_hop, graph_ref, graph_edge_type, graph_confidence, graph_score,
    graph_seed and graph_total (the candidates the traversal reached, readable or not). `condition` is SQL on
    memories m. Parameters: as expand()'s, plus the condition's.

    Built once per (depth, columns, condition) and process: the same few texts serve every call, and the same
    string object is hashed once by the statement caches downstream."""
    best = _BEST_READABLE_SQL.format(
        columns=columns, condition=condition, best_columns=columns.replace("m.", "b.")
    )
    return _expansion_sql(depth, best=best)


def expansion_params(*, workspace_id: int, seed_memory_ids: list[uuid.UUID], limit: int) -> dict[str, object]:
    return {
        "ws": workspace_id,
        "seeds": list(seed_memory_ids),
        "fanout": EDGE_FANOUT,
        "links": LINK_FANOUT,
        "read_cap": EDGE_READ_CAP,
        "limit": limit,
    }


def expand(*, workspace_id: int, seed_memory_ids: list[uuid.UUID], depth: int, limit: int) -> Expansion:
    """Memories reachable from the seeds within `depth` hops, best first, at most `limit`, with no scope
    check: the traversal itself, which the tests examine. context/get reads through readable_expansion_sql
    with the caller's scope. One query."""
    if not seed_memory_ids or depth < 1 or limit < 1:
        return Expansion(memory_ids=[], reasons={}, total_candidates=0)
    sql = readable_expansion_sql(
        depth=depth, columns="m.id, m.updated_at", condition="m.workspace_id = %(ws)s"
    )
    # Prepared (generic plan, graphsvc.apps): planning the statement cost more than running it at depth 1, and
    # the plan is index lookups from the seeds whatever the values (expand_micro: 5.6 -> 3.5 ms per depth-1
    # call).
    with prepared_cursor() as cursor:
        cursor.execute(
            sql, expansion_params(workspace_id=workspace_id, seed_memory_ids=seed_memory_ids, limit=limit)
        )
        rows = cursor.fetchall()
    reasons = {
        memory_id: Reason(ref, edge_type, hop, confidence, score, str(seed))
        for memory_id, _, hop, ref, edge_type, confidence, score, seed, _ in rows
    }
    return Expansion(memory_ids=list(reasons), reasons=reasons, total_candidates=rows[0][-1] if rows else 0)


def contradictions(
    *, workspace_id: int, memory_ids: list[uuid.UUID], along: tuple[str, list[Any]] | None = None
) -> list[dict[str, object]]:
    """Active contradicts edges between returned memories, one per unordered pair (max confidence).

    `along`: a data-modifying statement (SQL with positional values) sent in the same round trip, as a CTE of
    this one; it runs once, to completion, even when there is nothing to look up."""
    if len(memory_ids) < 2:
        if along is not None:
            with prepared_cursor() as cursor:
                cursor.execute(*along)
        return []
    keys = [str(memory_id) for memory_id in memory_ids]
    head, head_params = (f"WITH along AS ({along[0]})", along[1]) if along is not None else ("", [])
    with prepared_cursor() as cursor:  # planning was most of its cost (0.4 of 0.5 ms)
        cursor.execute(
            head
            + """
            SELECT least(a.node_key, b.node_key), greatest(a.node_key, b.node_key), max(e.confidence),
                   (array_agg(e.metadata->>'explanation' ORDER BY e.confidence DESC)
                        FILTER (WHERE e.metadata->>'explanation' IS NOT NULL))[1],
                   (array_agg(e.evidence_text ORDER BY e.confidence DESC)
                        FILTER (WHERE e.evidence_text IS NOT NULL))[1]
            FROM graph_edges e
            JOIN graph_nodes a ON a.id = e.from_node_id AND a.workspace_id = e.workspace_id
            JOIN graph_nodes b ON b.id = e.to_node_id AND b.workspace_id = e.workspace_id
            WHERE e.workspace_id = %s AND e.edge_type = 'contradicts'
              AND e.expired_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > now())
              AND a.node_type = 'memory' AND b.node_type = 'memory'
              AND a.node_key = ANY(%s) AND b.node_key = ANY(%s) AND a.node_key <> b.node_key
            GROUP BY 1, 2
            ORDER BY 3 DESC, 1, 2
            """,
            [*head_params, workspace_id, keys, keys],
        )
        rows = cursor.fetchall()
    return [
        {
            "memoryAId": a,
            "memoryBId": b,
            "edgeType": "contradicts",
            "confidence": round(float(confidence), 4),
            # The model's own explanation and quote when relationship extraction gave them.
            "explanation": explanation
            or "These memories are linked by a contradiction edge from relationship extraction.",
            "evidence": evidence,
            "suggestion": (
                "These memories may conflict. "
                "Consider asking the user to clarify which preference is current."
            ),
        }
        for a, b, confidence, explanation, evidence in rows
    ]
