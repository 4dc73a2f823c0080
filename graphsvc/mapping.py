"""The deterministic memory graph: nodes, links and edges derived from a memory's type, project, user,
category and tags, synced inside the memory's write transaction.

Differences from memories.sh, on purpose:
- shared nodes (types, topics, repos, …) are inserted with ON CONFLICT DO NOTHING, so concurrent writes that
  mention the same tag do not queue behind one row lock;
- a re-sync replaces only the memory's own mapping (its links and the edges it is evidence for), so an edit of
  tags alone keeps its similar_to and LLM edges;
- orphan pruning checks only the nodes this change could have orphaned, not the whole table.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connections

MEMORY_LABEL_MAX = 120
RELATIONSHIP_EDGE_TYPES = (
    "similar_to",
    "contradicts",
    "supersedes",
    "caused_by",
    "prefers_over",
    "depends_on",
    "specializes",
    "conditional_on",
)


@dataclass(frozen=True)
class MemorySnapshot:
    """What the mapping needs of a memory (memories app stays out of graphsvc's imports)."""

    id: uuid.UUID
    workspace_id: int
    content: str
    type: str
    layer: str
    scope: str
    project_id: str | None
    user_id: str | None
    category: str | None
    tags: list[str]
    expires_at: datetime | None


@dataclass
class DeterministicGraph:
    nodes: list[tuple[str, str, str, dict[str, Any] | None]] = field(default_factory=list)
    links: list[tuple[str, str, str]] = field(default_factory=list)  # (node_type, node_key, role)
    edges: list[tuple[str, tuple[str, str], tuple[str, str]]] = field(
        default_factory=list
    )  # (type, from, to)


def memory_label(content: str, memory_id: str) -> str:
    text = " ".join(content.split())
    if not text:
        return memory_id
    return text if len(text) <= MEMORY_LABEL_MAX else text[: MEMORY_LABEL_MAX - 3] + "..."


def normalised_tags(tags: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(tag.strip().lower() for tag in tags if tag and tag.strip()))


def extract_deterministic_graph(memory: MemorySnapshot) -> DeterministicGraph:
    graph = DeterministicGraph()
    memory_key = str(memory.id)
    graph.nodes.append(
        (
            "memory",
            memory_key,
            memory_label(memory.content, memory_key),
            {
                "memoryId": memory_key,
                "type": memory.type,
                "layer": memory.layer,
                "scope": memory.scope,
                "projectId": memory.project_id,
                "userId": memory.user_id,
            },
        )
    )
    graph.links.append(("memory", memory_key, "self"))
    graph.nodes.append(("memory_type", memory.type, memory.type, None))
    graph.links.append(("memory_type", memory.type, "type"))

    repo: tuple[str, str] | None = None
    if memory.project_id:
        repo = ("repo", memory.project_id)
        graph.nodes.append(
            (
                "repo",
                memory.project_id,
                memory.project_id.rstrip("/").split("/")[-1] or memory.project_id,
                {"projectId": memory.project_id},
            )
        )
        graph.links.append((*repo, "scope"))
    user: tuple[str, str] | None = None
    if memory.user_id:
        user = ("user", memory.user_id)
        graph.nodes.append(("user", memory.user_id, memory.user_id, {"userId": memory.user_id}))
        graph.links.append((*user, "subject"))
    category: tuple[str, str] | None = None
    if memory.category and memory.category.strip():
        category = ("category", memory.category.strip().lower())
        graph.nodes.append((*category, memory.category.strip(), {"category": memory.category.strip()}))
        graph.links.append((*category, "category"))
    topics = [("topic", tag) for tag in normalised_tags(memory.tags)]
    for topic in topics:
        graph.nodes.append((*topic, topic[1], {"tag": topic[1]}))
        graph.links.append((*topic, "tag"))

    memory_type = ("memory_type", memory.type)
    if repo and user:
        graph.edges.append(("authored_by", repo, user))
    if repo:
        graph.edges.append(("contains_type", repo, memory_type))
    if category:
        if repo:
            graph.edges.append(("about", repo, category))
        if user:
            graph.edges.append(("about", user, category))
    for topic in topics:
        if repo:
            graph.edges.append(("about", repo, topic))
        if user:
            graph.edges.append(("mentions", user, topic))
        if category:
            graph.edges.append(("related_to", category, topic))
    return graph


# --- writing ------------------------------------------------------------------------------------------------

_UPSERT_SHARED_NODES = """
WITH input(node_type, node_key, label, metadata)
    AS (SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::jsonb[])),
inserted AS (
    INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, metadata, created_at, updated_at)
    SELECT %s, node_type, node_key, label, metadata, now(), now() FROM input
    ON CONFLICT (workspace_id, node_type, node_key) DO NOTHING
    RETURNING id, node_type, node_key
)
SELECT id, node_type, node_key FROM inserted
UNION ALL
SELECT g.id, g.node_type, g.node_key FROM graph_nodes g JOIN input i USING (node_type, node_key)
WHERE g.workspace_id = %s
"""

_SELECT_NODES = """
SELECT g.id, g.node_type, g.node_key FROM graph_nodes g
JOIN unnest(%s::text[], %s::text[]) AS i(node_type, node_key) USING (node_type, node_key)
WHERE g.workspace_id = %s
"""

_UPSERT_MEMORY_NODE = """
INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, metadata, created_at, updated_at)
VALUES (%s, 'memory', %s, %s, %s::jsonb, now(), now())
ON CONFLICT (workspace_id, node_type, node_key) DO UPDATE
    SET label = EXCLUDED.label, metadata = EXCLUDED.metadata, updated_at = EXCLUDED.updated_at
RETURNING id
"""


def node_ids(
    *, workspace_id: int, nodes: list[tuple[str, str, str, dict[str, Any] | None]]
) -> dict[tuple[str, str], int]:
    """Ids of the given nodes, creating the missing ones without taking row locks on existing ones."""
    if not nodes:
        return {}
    unique = list({(n[0], n[1]): n for n in nodes}.values())
    params: list[list[str] | list[str | None] | int] = [
        [n[0] for n in unique],
        [n[1] for n in unique],
        [n[2][:300] for n in unique],
        [json.dumps(n[3]) if n[3] is not None else None for n in unique],
        workspace_id,
        workspace_id,
    ]
    with connections["app"].cursor() as cursor:
        cursor.execute(_UPSERT_SHARED_NODES, params)
        ids = {(row[1], row[2]): row[0] for row in cursor.fetchall()}
        missing = [(t, k) for t, k, _, _ in unique if (t, k) not in ids]
        if missing:
            # Inserted by a concurrent transaction that committed after this statement's snapshot.
            cursor.execute(_SELECT_NODES, [[m[0] for m in missing], [m[1] for m in missing], workspace_id])
            ids.update({(row[1], row[2]): row[0] for row in cursor.fetchall()})
    return ids


def memory_node_id(*, memory: MemorySnapshot) -> int:
    graph_node = extract_deterministic_graph(memory).nodes[0]
    with connections["app"].cursor() as cursor:
        cursor.execute(
            _UPSERT_MEMORY_NODE,
            [memory.workspace_id, graph_node[1], graph_node[2], json.dumps(graph_node[3])],
        )
        return cursor.fetchone()[0]


@dataclass(frozen=True)
class FreshMappingOutcome:
    complete: bool  # every node of the mapping was seen: links and edges are all written
    error: str | None  # the statement failed (and wrote nothing): SQLSTATE and message


def mapping_insert_fresh(*, memory: MemorySnapshot) -> FreshMappingOutcome:
    """The whole mapping of a memory that has none yet (created in this transaction), in one round trip.

    The database function `graph_mapping_insert_fresh` (migration graphsvc 0015) runs the one statement inside
    its own EXCEPTION block, so a failure rolls back only the mapping and comes back as `error`, and the
    caller needs no savepoint. The statement's snapshot cannot see a shared node (a tag, a type) that a
    concurrent transaction committed while this one waited on its insert; the node then has no id here, its
    links and edges are missing and `complete` is False. That is rare (two first uses of one tag at once); the
    caller then redoes the mapping the long way (mapping_sync).
    """
    graph = extract_deterministic_graph(memory)
    unique = list({(n[0], n[1]): n for n in graph.nodes}.values())
    with connections["app"].cursor() as cursor:
        cursor.execute(
            # A bare call (no FROM): on Citus that is what is delegated whole to the workspace's shard.
            "SELECT graph_mapping_insert_fresh(%s::bigint, %s, %s::text[], %s::text[], "
            "%s::text[], %s::jsonb[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::text[], %s::text[], %s::timestamptz)",
            [
                memory.workspace_id,
                memory.id,
                [n[0] for n in unique],
                [n[1] for n in unique],
                [n[2][:300] for n in unique],
                [json.dumps(n[3]) if n[3] is not None else None for n in unique],
                [link[0] for link in graph.links],
                [link[1] for link in graph.links],
                [link[2] for link in graph.links],
                [edge[0] for edge in graph.edges],
                [edge[1][0] for edge in graph.edges],
                [edge[1][1] for edge in graph.edges],
                [edge[2][0] for edge in graph.edges],
                [edge[2][1] for edge in graph.edges],
                memory.expires_at if memory.layer == "working" else None,
            ],
        )
        # The record comes back as its fields' text.
        node_text, error = cursor.fetchone()[0]
    node_count = int(node_text) if node_text is not None else None
    return FreshMappingOutcome(complete=error is None and node_count == len(unique), error=error)


def mapping_sync(*, memory: MemorySnapshot) -> None:
    """Replace the memory's deterministic mapping. Call inside a savepoint (see pipeline.services). A memory
    created in this transaction takes mapping_insert_fresh instead: one round trip, no savepoint."""
    graph = extract_deterministic_graph(memory)
    workspace_id = memory.workspace_id
    orphan_candidates = _remove_own_mapping(
        workspace_id=workspace_id, memory_ids=[memory.id], keep_mentions=True
    )
    ids = node_ids(workspace_id=workspace_id, nodes=graph.nodes[1:])
    ids[("memory", str(memory.id))] = memory_node_id(memory=memory)
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memory_node_links (workspace_id, memory_id, node_id, role, created_at)
            SELECT %s, %s, node_id, role, now() FROM unnest(%s::bigint[], %s::text[]) AS l(node_id, role)
            ON CONFLICT DO NOTHING
            """,
            [
                workspace_id,
                memory.id,
                [ids[(t, k)] for t, k, _ in graph.links],
                [r for _, _, r in graph.links],
            ],
        )
        if graph.edges:
            from_ids = [ids[edge[1]] for edge in graph.edges]
            to_ids = [ids[edge[2]] for edge in graph.edges]
            keys = [
                f"m:{memory.id}:{edge[0]}:{f}:{t}"
                for edge, f, t in zip(graph.edges, from_ids, to_ids, strict=True)
            ]
            cursor.execute(
                """
                INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type,
                    edge_class, weight, confidence, evidence_memory_id, origin, created_at, updated_at,
                    expires_at, last_observed_at, retrieval_count)
                SELECT %s, key, from_id, to_id, edge_type, 'semantic', 1.0, 1.0, %s, 'mapping', now(), now(),
                    %s, now(), 0
                FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::text[])
                    AS e(key, from_id, to_id, edge_type)
                ON CONFLICT (workspace_id, edge_key) WHERE expired_at IS NULL DO UPDATE
                    SET expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at,
                        last_observed_at = EXCLUDED.last_observed_at
                """,
                [
                    workspace_id,
                    memory.id,
                    memory.expires_at if memory.layer == "working" else None,
                    keys,
                    from_ids,
                    to_ids,
                    [edge[0] for edge in graph.edges],
                ],
            )
    orphan_candidates -= set(ids.values())
    prune_orphans(workspace_id=workspace_id, node_ids=orphan_candidates)


def _remove_own_mapping(
    *, workspace_id: int, memory_ids: list[uuid.UUID], keep_mentions: bool = False
) -> set[int]:
    """Delete the memories' links and the mapping edges they are evidence for; return nodes that may be
    orphaned.

    A re-sync keeps the `mentions` links: they come from LLM extraction, which an edit of tags does not redo.
    """
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "DELETE FROM memory_node_links WHERE workspace_id = %s AND memory_id = ANY(%s) "
            "AND NOT (%s AND role = 'mentions') RETURNING node_id",
            [workspace_id, memory_ids, keep_mentions],
        )
        candidates = {row[0] for row in cursor.fetchall()}
        cursor.execute(
            """
            DELETE FROM graph_edges WHERE workspace_id = %s AND evidence_memory_id = ANY(%s)
                AND origin = 'mapping'
            RETURNING from_node_id, to_node_id
            """,
            [workspace_id, memory_ids],
        )
        for from_id, to_id in cursor.fetchall():
            candidates.update((from_id, to_id))
    return candidates


def mapping_remove(*, workspace_id: int, memory_ids: list[uuid.UUID]) -> None:
    """Forget/vacuum: drop the memories' mapping, every edge touching their memory nodes, the facts they were
    evidence for, and the nodes left without links or edges."""
    if not memory_ids:
        return
    candidates = _remove_own_mapping(workspace_id=workspace_id, memory_ids=memory_ids)
    keys = [str(memory_id) for memory_id in memory_ids]
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT id FROM graph_nodes WHERE workspace_id = %s AND node_type = 'memory' "
            "AND node_key = ANY(%s)",
            [workspace_id, keys],
        )
        memory_nodes = [row[0] for row in cursor.fetchall()]
        if memory_nodes:
            cursor.execute(
                """
                DELETE FROM graph_edges
                WHERE workspace_id = %s AND (from_node_id = ANY(%s) OR to_node_id = ANY(%s))
                RETURNING from_node_id, to_node_id
                """,
                [workspace_id, memory_nodes, memory_nodes],
            )
            for from_id, to_id in cursor.fetchall():
                candidates.update((from_id, to_id))
            candidates.update(memory_nodes)
        candidates.update(facts_unsupport(cursor, workspace_id=workspace_id, memory_ids=memory_ids))
    prune_orphans(workspace_id=workspace_id, node_ids=candidates)


def facts_unsupport(cursor: Any, *, workspace_id: int, memory_ids: list[uuid.UUID]) -> set[int]:
    """The forgotten memories stop supporting their facts. A fact other memories still support stays (its
    shown source moves to one of them); a fact left without evidence ends with its history, and a version it
    had replaced comes back if that one still has evidence. Returns the entities the deleted facts touched,
    for orphan pruning."""
    cursor.execute(
        "DELETE FROM graph_fact_evidence WHERE workspace_id = %s AND memory_id = ANY(%s) RETURNING edge_id",
        [workspace_id, memory_ids],
    )
    touched = sorted({row[0] for row in cursor.fetchall()})
    if not touched:
        return set()
    cursor.execute(
        """
        SELECT e.id FROM graph_edges e
        WHERE e.workspace_id = %(ws)s AND e.id = ANY(%(ids)s) AND e.origin = 'llm_entity'
          AND NOT EXISTS (SELECT 1 FROM graph_fact_evidence fe
                          WHERE fe.workspace_id = %(ws)s AND fe.edge_id = e.id)
        """,
        {"ws": workspace_id, "ids": touched},
    )
    unsupported = [row[0] for row in cursor.fetchall()]
    # Before the delete: the superseded_by link of the versions they replaced is cleared with it.
    cursor.execute(
        """
        SELECT p.id FROM graph_edges p
        WHERE p.workspace_id = %(ws)s AND p.superseded_by_id = ANY(%(gone)s) AND NOT (p.id = ANY(%(gone)s))
          AND EXISTS (SELECT 1 FROM graph_fact_evidence fe
                      WHERE fe.workspace_id = %(ws)s AND fe.edge_id = p.id)
        """,
        {"ws": workspace_id, "gone": unsupported},
    )
    revivable = [row[0] for row in cursor.fetchall()]
    ends: set[int] = set()
    if unsupported:
        cursor.execute(
            "DELETE FROM graph_edges WHERE workspace_id = %s AND id = ANY(%s) "
            "RETURNING from_node_id, to_node_id",
            [workspace_id, unsupported],
        )
        for from_id, to_id in cursor.fetchall():
            ends.update((from_id, to_id))
    if revivable:
        # Current again, unless a newer version of the same relation is current by now.
        cursor.execute(
            """
            UPDATE graph_edges p SET valid_to = NULL, expired_at = NULL, superseded_by_id = NULL,
                updated_at = now()
            WHERE p.workspace_id = %(ws)s AND p.id = ANY(%(ids)s)
              AND NOT EXISTS (SELECT 1 FROM graph_edges c WHERE c.workspace_id = %(ws)s
                  AND c.edge_key = p.edge_key AND c.expired_at IS NULL)
            """,
            {"ws": workspace_id, "ids": revivable},
        )
    cursor.execute(
        """
        UPDATE graph_edges e SET evidence_memory_id = fe.memory_id, evidence_text = fe.evidence_text,
            updated_at = now()
        FROM (SELECT DISTINCT ON (edge_id) edge_id, memory_id, evidence_text FROM graph_fact_evidence
              WHERE workspace_id = %(ws)s AND edge_id = ANY(%(ids)s) ORDER BY edge_id, created_at, id) fe
        WHERE e.workspace_id = %(ws)s AND e.id = fe.edge_id AND e.evidence_memory_id = ANY(%(forgotten)s)
        """,
        {"ws": workspace_id, "ids": touched, "forgotten": memory_ids},
    )
    return ends


def prune_orphans(*, workspace_id: int, node_ids: Iterable[int]) -> int:
    """Delete the given nodes that have no link and no edge left (condition nodes live by their edges
    alone)."""
    ids = list(node_ids)
    if not ids:
        return 0
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            DELETE FROM graph_nodes n
            WHERE n.workspace_id = %s AND n.id = ANY(%s)
              AND NOT EXISTS (SELECT 1 FROM memory_node_links l WHERE l.workspace_id = n.workspace_id
                  AND l.node_id = n.id)
              AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.workspace_id = n.workspace_id
                  AND e.from_node_id = n.id)
              AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.workspace_id = n.workspace_id
                  AND e.to_node_id = n.id)
            """,
            [workspace_id, ids],
        )
        return cursor.rowcount
