"""Graph expansion for context/get (memories-sh.md §4.3), with provenance for every memory it adds.

Seeds are the baseline memories; the nodes they link to are hop 0; breadth-first over active edges, undirected.
Improvements on the anchor:
- no arbitrary LIMIT at hubs: each frontier node keeps its best `EDGE_FANOUT` edges by score among its
  `EDGE_READ_CAP` heaviest (read in weight order from an index, so a hub with 100k edges costs a bounded read),
  and each traversed node contributes at most `LINK_FANOUT` linked memories (the newest), so a type or topic node
  linked to 100k memories costs a bounded, indexed read instead of truncating somewhere random;
- type nodes (memory_type:note …) are not hop-0 nodes: sharing a type is not a relation;
- the score the final order uses includes the edge weight, as the anchor's docs say
  (type weight × edge weight × confidence / max(1, hop)).
One query, whatever the graph's size and the depth.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from django.db import connections

from graphsvc.facts import prepared_cursor

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
# Edges read per frontier node and direction, heaviest first (an index in that order, migration 0014): a user or
# repo node gets a mapping edge per memory written (100k for a busy user), and reading all of them on every call
# made expansion cost grow with the workspace. A node with fewer edges than this is ranked exactly as before.
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
    node_id: int | None = None  # the graph node of node_ref, for a node reached through a hop

    def better_than(self, other: Reason | None) -> bool:
        return other is None or (self.hop, -self.score) < (other.hop, -other.score)

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


# One statement for the whole traversal: hop 0, each hop's best edges per frontier node, and the newest memories
# linked to every node reached. Every part is tagged with its stage so Python can replay the breadth-first
# bookkeeping (first seed wins at hop 0, best reason per node) over rows in the order the stages ran. A node joins
# the next frontier when a hop reaches it for the first time, which SQL expresses as "a neighbour of this hop
# that no earlier stage reached". Each frontier node reads its edges in its own index scan (a LATERAL subquery per
# direction, heaviest first, at most EDGE_READ_CAP), whatever the planner guesses the frontier's size to be.
_HOP0_SQL = """
hop0 AS (
    SELECT l.node_id, n.node_type || ':' || n.node_key AS ref, l.memory_id AS seed, l.id AS ord
    FROM memory_node_links l JOIN graph_nodes n ON n.id = l.node_id AND n.workspace_id = l.workspace_id
    WHERE l.workspace_id = %(ws)s AND l.memory_id = ANY(%(seeds)s) AND n.node_type <> 'memory_type'
), seen0 AS (SELECT DISTINCT node_id FROM hop0)"""

_HOP_SQL = """
hop{k} AS (
    SELECT ranked.via, ranked.neighbour, ranked.edge_type, ranked.weight, ranked.confidence FROM (
        SELECT s.via, s.neighbour, s.edge_type, s.weight, s.confidence,
               row_number() OVER (PARTITION BY s.via ORDER BY s.score DESC, s.edge_id) AS rank
        FROM frontier{k} f CROSS JOIN LATERAL (
            (SELECT f.node_id AS via, e.to_node_id AS neighbour, e.edge_type, e.weight, e.confidence,
                    e.id AS edge_id, {weight} * e.weight * least(1, greatest(0, e.confidence)) AS score
             FROM graph_edges e
             WHERE e.workspace_id = %(ws)s AND e.from_node_id = f.node_id
               AND e.expired_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > now())
             ORDER BY e.weight DESC, e.id
             LIMIT %(read_cap)s)
            UNION ALL
            (SELECT f.node_id, e.from_node_id, e.edge_type, e.weight, e.confidence, e.id,
                    {weight} * e.weight * least(1, greatest(0, e.confidence))
             FROM graph_edges e
             WHERE e.workspace_id = %(ws)s AND e.to_node_id = f.node_id
               AND e.expired_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > now())
             ORDER BY e.weight DESC, e.id
             LIMIT %(read_cap)s)
        ) s
    ) ranked
    WHERE ranked.rank <= %(fanout)s
), seen{k} AS (SELECT node_id FROM seen{prev} UNION SELECT neighbour FROM hop{k})"""

_LINKS_SQL = """
SELECT 0 AS stage, NULL::bigint AS via, node_id AS node, ref, NULL::text AS edge_type, NULL::float8 AS weight,
       NULL::float8 AS confidence, seed AS memory_id, ord
FROM hop0
{hops}
UNION ALL
SELECT {last}, NULL, t.node_id, NULL, NULL, NULL, NULL, l.memory_id, 0
FROM seen{depth} t CROSS JOIN LATERAL (
    SELECT memory_id FROM memory_node_links
    WHERE workspace_id = %(ws)s AND node_id = t.node_id AND memory_id <> ALL(%(seeds)s)
    ORDER BY id DESC
    LIMIT %(links)s
) l
ORDER BY stage, ord
"""


def _expansion_sql(depth: int) -> str:
    ctes = [_HOP0_SQL]
    for k in range(1, depth + 1):
        # Hop 1 starts from every hop-0 node; hop k > 1 from the nodes hop k - 1 reached first.
        frontier = (f"frontier{k} AS (SELECT node_id FROM seen0)" if k == 1 else
                    f"frontier{k} AS (SELECT neighbour AS node_id FROM hop{k - 1} "
                    f"EXCEPT SELECT node_id FROM seen{k - 2})")
        ctes.append(frontier + "," + _HOP_SQL.format(k=k, prev=k - 1, weight=_TYPE_WEIGHT_SQL))
    hops = "".join(
        f"UNION ALL SELECT {k}, via, neighbour, NULL, edge_type, weight, confidence, NULL, 0 FROM hop{k}\n"
        for k in range(1, depth + 1)
    )
    return "WITH " + ",".join(ctes) + _LINKS_SQL.format(hops=hops, last=depth + 1, depth=depth)


def expand(*, workspace_id: int, seed_memory_ids: list[uuid.UUID], depth: int, limit: int) -> Expansion:
    """Memories reachable from the seeds within `depth` hops, best first, at most `limit` (before scope checks,
    which the caller applies when it reloads them — so ask for a few more than you will show). One query."""
    if not seed_memory_ids or depth < 1 or limit < 1:
        return Expansion(memory_ids=[], reasons={}, total_candidates=0)
    # Prepared (generic plan, graphsvc.apps): planning the statement cost more than running it at depth 1, and the
    # plan is index lookups from the seeds whatever the values (expand_micro: 5.6 -> 3.5 ms per depth-1 call).
    with prepared_cursor() as cursor:
        cursor.execute(
            _expansion_sql(depth),
            {"ws": workspace_id, "seeds": list(seed_memory_ids), "fanout": EDGE_FANOUT, "links": LINK_FANOUT,
             "read_cap": EDGE_READ_CAP},
        )
        rows = cursor.fetchall()
    node_reason: dict[int, Reason] = {}
    reasons: dict[uuid.UUID, Reason] = {}
    for stage, via, node, ref, edge_type, weight, confidence, memory_id, _ in rows:
        if stage == 0:
            # Hop 0: every node a seed links to (its own memory node, repo, user, category, topics). Type nodes
            # are left out: every note shares "memory_type:note", which relates nothing to anything.
            node_reason.setdefault(node, Reason(ref, "seed", 0, 1.0, 1.0, str(memory_id)))
        elif stage <= depth:
            confidence = min(1.0, max(0.0, float(confidence)))
            score = type_weight(edge_type) * float(weight) * confidence / max(1, stage)
            # Labelled below, for the memories returned only (a depth-2 traversal keeps ~1,000 edges).
            reason = Reason("", edge_type, stage, confidence, score, node_reason[via].seed_memory_id, node)
            if reason.better_than(node_reason.get(node)):
                node_reason[node] = reason
        else:
            _link_reason(reasons, node_reason[node], memory_id)
    ordered = sorted(reasons, key=lambda m: (-reasons[m].score, reasons[m].hop, m))[:limit]  # m: as its text
    _label(workspace_id, reasons, ordered)
    return Expansion(memory_ids=ordered, reasons=reasons, total_candidates=len(reasons))


def _label(workspace_id: int, reasons: dict[uuid.UUID, Reason], memory_ids: list[uuid.UUID]) -> None:
    """The node_ref of the reasons of `memory_ids` reached through a hop (hop 0 nodes come labelled)."""
    unlabelled = {reasons[m].node_id for m in memory_ids if reasons[m].node_id is not None and not reasons[m].node_ref}
    if not unlabelled:
        return
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT id, node_type || ':' || node_key FROM graph_nodes WHERE workspace_id = %s AND id = ANY(%s)",
            [workspace_id, list(unlabelled)],
        )
        labels = dict(cursor.fetchall())
    for memory_id in memory_ids:
        reason = reasons[memory_id]
        if reason.node_id in labels and not reason.node_ref:
            reasons[memory_id] = replace(reason, node_ref=labels[reason.node_id])


def _link_reason(reasons: dict[uuid.UUID, Reason], via: Reason, memory_id: uuid.UUID) -> None:
    """The newest memories linked to each traversed node are the candidates (seeds excluded)."""
    if via.hop == 0:
        # Reached through a node the seed itself links to (a shared tag, repo, type …).
        candidate = Reason(via.node_ref, "shared_node", 1, 1.0, type_weight("shared_node"), via.seed_memory_id)
    else:
        candidate = via
    if candidate.better_than(reasons.get(memory_id)):
        reasons[memory_id] = candidate


def contradictions(*, workspace_id: int, memory_ids: list[uuid.UUID]) -> list[dict[str, object]]:
    """Active contradicts edges between returned memories, one per unordered pair (max confidence)."""
    if len(memory_ids) < 2:
        return []
    keys = [str(memory_id) for memory_id in memory_ids]
    with prepared_cursor() as cursor:  # planning was most of its cost (0.4 of 0.5 ms)
        cursor.execute(
            """
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
            [workspace_id, keys, keys],
        )
        rows = cursor.fetchall()
    return [
        {
            "memoryAId": a,
            "memoryBId": b,
            "edgeType": "contradicts",
            "confidence": round(float(confidence), 4),
            # The model's own explanation and quote when relationship extraction gave them.
            "explanation": explanation or "These memories are linked by a contradiction edge from relationship "
            "extraction.",
            "evidence": evidence,
            "suggestion": "These memories may conflict. Consider asking the user to clarify which preference is current.",
        }
        for a, b, confidence, explanation, evidence in rows
    ]
