"""similar_to edges (memories.sh's approach, improved): from a memory's true nearest neighbours within its
read scope, bidirectional, weight = cosine, evidence = the memory whose embedding produced them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import connections


@dataclass(frozen=True)
class SimilarityUpdate:
    memory_id: uuid.UUID
    neighbours: list[tuple[uuid.UUID, float]]
    expires_at: datetime | None


def similarity_edges_replace(*, workspace_id: int, updates: list[SimilarityUpdate]) -> int:
    """Replace the similar_to edges of each memory with its current neighbours; return the directed edges
    written.

    Every similar_to edge touching an updated memory goes, not only those it is evidence for: an edge another
    memory found was measured against this memory's previous vector (its old content or model), and which end
    of a pair is the evidence depended on the order of a batch. One round of queries for the whole batch.
    Running it twice with the same neighbours leaves the same rows (keys are per directed pair; a pair found
    from both ends keeps one edge each way, the last writer's evidence).
    """
    if not updates:
        return 0
    keys = {str(u.memory_id) for u in updates} | {str(n) for u in updates for n, _ in u.neighbours}
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT node_key, id FROM graph_nodes WHERE workspace_id = %s AND node_type = 'memory' "
            "AND node_key = ANY(%s)",
            [workspace_id, list(keys)],
        )
        node_by_memory = dict(cursor.fetchall())
        updated_nodes = [
            node_by_memory[str(u.memory_id)] for u in updates if str(u.memory_id) in node_by_memory
        ]
        cursor.execute(
            """
            DELETE FROM graph_edges
            WHERE workspace_id = %s AND edge_type = 'similar_to'
              AND (evidence_memory_id = ANY(%s) OR from_node_id = ANY(%s) OR to_node_id = ANY(%s))
            """,
            [workspace_id, [u.memory_id for u in updates], updated_nodes, updated_nodes],
        )
        rows: dict[str, tuple[int, int, float, uuid.UUID, datetime | None]] = {}
        for update in updates:
            own_node = node_by_memory.get(str(update.memory_id))
            if own_node is None:
                continue
            for neighbour, score in update.neighbours:
                other = node_by_memory.get(str(neighbour))
                if other is None:
                    continue  # the neighbour's mapping is missing (a failed sync); a re-sync adds it
                for from_id, to_id in ((own_node, other), (other, own_node)):
                    rows[f"r:similar_to:{from_id}:{to_id}"] = (
                        from_id,
                        to_id,
                        score,
                        update.memory_id,
                        update.expires_at,
                    )
        if not rows:
            return 0
        values = list(rows.items())
        cursor.execute(
            """
            INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class,
                weight, confidence, evidence_memory_id, origin, created_at, updated_at, expires_at,
                last_observed_at, retrieval_count)
            SELECT %s, key, from_id, to_id, 'similar_to', 'semantic', score, 1.0, evidence, 'similarity',
                now(), now(), expires_at, now(), 0
            FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::float8[], %s::uuid[], %s::timestamptz[])
                AS e(key, from_id, to_id, score, evidence, expires_at)
            ON CONFLICT (workspace_id, edge_key) WHERE expired_at IS NULL DO UPDATE
                SET weight = EXCLUDED.weight, evidence_memory_id = EXCLUDED.evidence_memory_id,
                    expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at,
                    last_observed_at = EXCLUDED.last_observed_at
            """,
            [
                workspace_id,
                [key for key, _ in values],
                [v[0] for _, v in values],
                [v[1] for _, v in values],
                [v[2] for _, v in values],
                [v[3] for _, v in values],
                [v[4] for _, v in values],
            ],
        )
        return len(values)


def similarity_edges_set_expiry(
    *, workspace_id: int, memory_id: uuid.UUID, expires_at: datetime | None
) -> None:
    """A layer change (working ↔ long_term) moves the expiry of the similar_to edges this memory produced."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            UPDATE graph_edges SET expires_at = %s, updated_at = now()
            WHERE workspace_id = %s AND evidence_memory_id = %s AND origin = 'similarity'
            """,
            [expires_at, workspace_id, memory_id],
        )
