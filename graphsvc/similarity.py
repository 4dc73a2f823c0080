"""similar_to edges (memories-sh.md §3.3, improved): from a memory's true nearest neighbours within its read
scope, bidirectional, weight = cosine, evidence = the memory whose embedding produced them."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import connections


def similarity_edges_replace(
    *,
    workspace_id: int,
    memory_id: uuid.UUID,
    neighbours: list[tuple[uuid.UUID, float]],
    expires_at: datetime | None,
) -> int:
    """Replace the similar_to edges this memory is evidence for; return the number of directed edges written.

    Running it twice with the same neighbours leaves the same rows (keys are per directed pair).
    """
    keys = [str(memory_id)] + [str(neighbour) for neighbour, _ in neighbours]
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT node_key, id FROM graph_nodes WHERE workspace_id = %s AND node_type = 'memory' AND node_key = ANY(%s)",
            [workspace_id, keys],
        )
        node_by_memory = dict(cursor.fetchall())
        cursor.execute(
            """
            DELETE FROM graph_edges
            WHERE workspace_id = %s AND edge_type = 'similar_to' AND evidence_memory_id = %s
            """,
            [workspace_id, memory_id],
        )
        own_node = node_by_memory.get(str(memory_id))
        if own_node is None:
            return 0
        rows: list[tuple[str, int, int, float]] = []
        for neighbour, score in neighbours:
            other = node_by_memory.get(str(neighbour))
            if other is None:
                continue  # the neighbour's mapping is missing (a failed sync); the backfill will add it
            rows.append((f"r:similar_to:{own_node}:{other}", own_node, other, score))
            rows.append((f"r:similar_to:{other}:{own_node}", other, own_node, score))
        if not rows:
            return 0
        cursor.execute(
            """
            INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class, weight,
                confidence, evidence_memory_id, origin, created_at, updated_at, expires_at, last_observed_at,
                retrieval_count)
            SELECT %s, key, from_id, to_id, 'similar_to', 'semantic', score, 1.0, %s, 'similarity', now(), now(), %s,
                now(), 0
            FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::float8[]) AS e(key, from_id, to_id, score)
            ON CONFLICT (workspace_id, edge_key) WHERE expired_at IS NULL DO UPDATE
                SET weight = EXCLUDED.weight, evidence_memory_id = EXCLUDED.evidence_memory_id,
                    expires_at = EXCLUDED.expires_at, updated_at = now(), last_observed_at = now()
            """,
            [workspace_id, memory_id, expires_at, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
             [r[3] for r in rows]],
        )
        return len(rows)


def similarity_edges_set_expiry(*, workspace_id: int, memory_id: uuid.UUID, expires_at: datetime | None) -> None:
    """A layer change (working ↔ long_term) moves the expiry of the similar_to edges this memory produced."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            UPDATE graph_edges SET expires_at = %s, updated_at = now()
            WHERE workspace_id = %s AND evidence_memory_id = %s AND origin = 'similarity'
            """,
            [expires_at, workspace_id, memory_id],
        )
