"""Reads on the graph: counts, hubs and health for graph/status."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import Q

from config.errors import ApiError
from config.prepared import prepared_cursor
from graphsvc.facts import EVERYONE, Audience


def graph_counts(*, workspace_id: int) -> dict[str, int]:
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT
              (SELECT count(*) FROM graph_nodes WHERE workspace_id = %(ws)s),
              (SELECT count(*) FROM graph_edges WHERE workspace_id = %(ws)s),
              (SELECT count(*) FROM memory_node_links WHERE workspace_id = %(ws)s),
              (SELECT count(*) FROM graph_edges WHERE workspace_id = %(ws)s AND expired_at IS NULL
                  AND (expires_at IS NULL OR expires_at > now())),
              (SELECT count(*) FROM graph_edges WHERE workspace_id = %(ws)s
                  AND (expired_at IS NOT NULL OR expires_at <= now())),
              (SELECT count(*) FROM graph_nodes n WHERE n.workspace_id = %(ws)s
                  AND NOT EXISTS (SELECT 1 FROM memory_node_links l
                                  WHERE l.workspace_id = n.workspace_id AND l.node_id = n.id)
                  AND NOT EXISTS (SELECT 1 FROM graph_edges e WHERE e.workspace_id = n.workspace_id
                      AND (e.from_node_id = n.id OR e.to_node_id = n.id)
                      AND e.expired_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > now())))
            """,
            {"ws": workspace_id},
        )
        nodes, edges, links, active, expired, orphans = cursor.fetchone()
    return {
        "nodes": nodes,
        "edges": edges,
        "memoryLinks": links,
        "activeEdges": active,
        "expiredEdges": expired,
        "orphanNodes": orphans,
    }


def top_connected_nodes(*, workspace_id: int, limit: int) -> list[dict[str, Any]]:
    """Hubs by degree (links + active edges in and out), found from the link and edge indexes."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            WITH degrees AS (
                SELECT node_id, sum(links) AS links, sum(outbound) AS outbound, sum(inbound) AS inbound FROM (
                    SELECT node_id, count(*) AS links, 0 AS outbound, 0 AS inbound
                    FROM memory_node_links WHERE workspace_id = %(ws)s GROUP BY node_id
                    UNION ALL
                    SELECT from_node_id, 0, count(*), 0 FROM graph_edges
                    WHERE workspace_id = %(ws)s AND expired_at IS NULL
                      AND (expires_at IS NULL OR expires_at > now())
                    GROUP BY from_node_id
                    UNION ALL
                    SELECT to_node_id, 0, 0, count(*) FROM graph_edges
                    WHERE workspace_id = %(ws)s AND expired_at IS NULL
                      AND (expires_at IS NULL OR expires_at > now())
                    GROUP BY to_node_id
                ) parts GROUP BY node_id
            )
            SELECT n.node_type, n.node_key, n.label, d.links, d.outbound, d.inbound,
                   d.links + d.outbound + d.inbound AS degree
            FROM degrees d JOIN graph_nodes n ON n.id = d.node_id AND n.workspace_id = %(ws)s
            ORDER BY degree DESC, n.node_type, n.node_key
            LIMIT %(limit)s
            """,
            {"ws": workspace_id, "limit": limit},
        )
        return [
            {
                "nodeType": row[0],
                "nodeKey": row[1],
                "label": row[2],
                "memoryLinks": int(row[3]),
                "outboundEdges": int(row[4]),
                "inboundEdges": int(row[5]),
                "degree": int(row[6]),
            }
            for row in cursor.fetchall()
        ]


def extraction_status(*, workspace_id: int) -> dict[str, Any]:
    """LLM extraction state of a workspace: on/off, budget, today's and all-time usage, what it has built."""

    from graphsvc import llm
    from graphsvc.models import ENTITY_TYPES, GraphSettings

    budget = llm.daily_token_budget(workspace_id=workspace_id)
    day_start = llm.next_budget_reset() - timedelta(days=1)
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT
              coalesce(sum(prompt_tokens + completion_tokens) FILTER (WHERE created_at >= %(day)s), 0),
              coalesce(sum(cost_usd) FILTER (WHERE created_at >= %(day)s), 0),
              count(*) FILTER (WHERE created_at >= %(day)s),
              count(*) FILTER (WHERE created_at >= %(day)s AND NOT ok),
              coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0),
              coalesce(sum(cost_usd), 0),
              count(*)
            FROM llm_usage WHERE workspace_id = %(ws)s
            """,
            {"ws": workspace_id, "day": day_start},
        )
        tokens_today, cost_today, calls_today, failed_today, prompt, completion, cost, calls = (
            cursor.fetchone()
        )
        cursor.execute(
            """
            SELECT
              (SELECT count(*) FILTER (WHERE archived_at IS NULL) FROM graph_nodes
                  WHERE workspace_id = %(ws)s AND node_type = ANY(%(types)s)),
              (SELECT count(*) FILTER (WHERE archived_at IS NOT NULL) FROM graph_nodes
                  WHERE workspace_id = %(ws)s AND node_type = ANY(%(types)s)),
              (SELECT count(*) FROM graph_edges WHERE workspace_id = %(ws)s AND origin = 'llm_entity'
                  AND expired_at IS NULL AND valid_to IS NULL),
              (SELECT count(*) FROM graph_edges WHERE workspace_id = %(ws)s AND origin = 'llm_entity'
                  AND (expired_at IS NOT NULL OR valid_to IS NOT NULL)),
              (SELECT count(*) FROM graph_edges WHERE workspace_id = %(ws)s
                  AND origin IN ('llm_pairwise', 'llm_semantic') AND expired_at IS NULL)
            """,
            {"ws": workspace_id, "types": list(ENTITY_TYPES)},
        )
        entities, archived_entities, active_facts, invalidated_facts, relationship_edges = cursor.fetchone()
    enabled = llm.llm_enabled()
    spent = budget is not None and tokens_today >= budget
    return {
        "enabled": enabled,
        "model": llm.model_for("entity_extraction") or None,
        "status": "off" if not enabled else ("budget_exhausted" if spent else "active"),
        "message": (
            "No GRAPH_LLM_MODEL is configured: relationships and entities are not extracted; everything else "
            "works."
            if not enabled
            else "Today's token budget is spent: extraction is paused until it resets "
            "(or the budget is raised)."
            if spent
            else "Extraction runs after each memory is embedded."
        ),
        "dailyTokenBudget": budget,
        "budgetResetsAt": llm.next_budget_reset(),
        "today": {
            "tokens": int(tokens_today),
            "costUsd": float(cost_today),
            "calls": calls_today,
            "failedCalls": failed_today,
        },
        "total": {
            "promptTokens": int(prompt),
            "completionTokens": int(completion),
            "costUsd": float(cost),
            "calls": calls,
        },
        "entities": entities,
        "archivedEntities": archived_entities,
        "activeFacts": active_facts,
        "invalidatedFacts": invalidated_facts,
        "relationshipEdges": relationship_edges,
        "lastEviction": GraphSettings.objects.filter(workspace_id=workspace_id)
        .values_list("last_eviction", flat=True)
        .first(),
    }


# --- entities, communities, stats ---------------------------------------------------------------------------


def _entity_json(row: tuple[Any, ...]) -> dict[str, Any]:
    from memories.prompt_text import prompt_line

    node_id, label, node_type, summary, mentions, community, last_seen, confidence = row
    return {
        "id": str(node_id),
        "name": prompt_line(label),
        "type": node_type,
        "summary": summary,
        "aliases": None,
        "mentionCount": mentions,
        "confidence": None if confidence is None else round(float(confidence), 4),
        "community": community,
        "lastSeenAt": last_seen,
        "facts": None,
        "merges": None,
    }


ENTITY_SELECT = """
    SELECT n.id, n.label, n.node_type, n.summary, n.mention_count, c.name, n.last_seen_at, n.confidence
    FROM graph_nodes n
    LEFT JOIN graph_community_members m ON m.workspace_id = n.workspace_id AND m.node_id = n.id
    LEFT JOIN graph_communities c ON c.workspace_id = m.workspace_id AND c.id = m.community_id
"""


# An id as the graph routes return it: ASCII digits within bigint.
ID_TEXT = re.compile(r"[0-9]{1,19}")
BIGINT_MAX = 2**63 - 1


def entities_cursor_id(cursor: str | None) -> int | None:
    """The entity id a graph/entities page cursor names (None: the first page); 400 INVALID_CURSOR for
    anything but a nextCursor. ASCII digits within bigint: str.isdigit() also accepts '¹' and '٣', which int()
    or Postgres then refuse."""
    if cursor is None:
        return None
    if not ID_TEXT.fullmatch(cursor) or int(cursor) > BIGINT_MAX:
        raise ApiError(
            400, "INVALID_CURSOR", "cursor must be the nextCursor of a previous graph/entities page."
        )
    return int(cursor)


def entities_list(
    *,
    workspace_id: int,
    query: str | None,
    entity_type: str | None,
    limit: int,
    cursor_id: int | None,
    audience: Audience = EVERYONE,
) -> dict[str, Any]:
    """Search (best text match first) or list (newest first, keyset pages on id); a restricted audience
    sees only the entities its end user's (or shared) memories mention. The type filter applies before the
    limit: a search for one type fills its page whenever enough entities of that type match."""
    from graphsvc.facts import visible_entity_and
    from graphsvc.models import ENTITY_TYPES

    types = [entity_type] if entity_type else list(ENTITY_TYPES)
    visible = visible_entity_and(audience)
    with connections["app"].cursor() as cursor:
        if query:
            order = {
                node_id: i
                for i, node_id in enumerate(
                    entities_search_ids(
                        workspace_id=workspace_id, query=query, types=types, limit=limit, audience=audience
                    )
                )
            }
            cursor.execute(
                ENTITY_SELECT + " WHERE n.workspace_id = %(ws)s AND n.id = ANY(%(ids)s)",
                {"ws": workspace_id, "ids": list(order)},
            )
            rows = sorted(cursor.fetchall(), key=lambda r: order[r[0]])
            return {"entities": [_entity_json(r) for r in rows], "nextCursor": None}
        cursor.execute(
            ENTITY_SELECT + " WHERE n.workspace_id = %(ws)s AND n.node_type = ANY(%(types)s)"
            " AND n.archived_at IS NULL AND (%(after)s::bigint IS NULL OR n.id < %(after)s)"
            + visible
            + " ORDER BY n.id DESC LIMIT %(limit)s",
            {
                "ws": workspace_id,
                "types": types,
                "after": cursor_id,
                "limit": limit + 1,
                "viewer": audience.user_id,
            },
        )
        rows = cursor.fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    return {"entities": [_entity_json(r) for r in rows], "nextCursor": str(rows[-1][0]) if more else None}


def entities_search_ids(
    *, workspace_id: int, query: str, types: list[str], limit: int, audience: Audience = EVERYONE
) -> list[int]:
    """Entity ids matching a query's words as seeds match them (name and alias words over summary words,
    prefixes, near spellings, whole multi-word names), of the given types, best text score first, then the
    most mentioned; one statement."""
    from graphsvc.facts import query_terms, seed_match_sql, seed_params

    terms = query_terms(query)
    if not terms.words:
        return []
    with prepared_cursor() as cursor:
        cursor.execute(
            f"""
            WITH {seed_match_sql(audience)}
            SELECT n.id FROM text t
            JOIN graph_nodes n
              ON n.workspace_id = %(ws)s AND n.id = t.node_id AND n.node_type = ANY(%(types)s)
             AND n.archived_at IS NULL
            ORDER BY t.score DESC, n.mention_count DESC, n.id LIMIT %(limit)s
            """,
            {
                **seed_params(
                    workspace_id=workspace_id, words=terms.words, limit=limit, phrases=terms.phrases
                ),
                "types": types,
                "limit": limit,
                "viewer": audience.user_id,
            },
        )
        return [row[0] for row in cursor.fetchall()]


def entity_merges(*, workspace_id: int, node_id: int, limit: int = 20) -> list[dict[str, Any]]:
    """The merges and splits an entity took part in, newest first."""
    from graphsvc.models import GraphEntityMerge
    from memories.prompt_text import prompt_line

    rows = (
        GraphEntityMerge.objects.filter(workspace_id=workspace_id)
        .filter(Q(survivor_id=node_id) | Q(merged_id=node_id))
        .order_by("-id")
        .values("id", "kind", "survivor_id", "merged_id", "merged_name", "created_at", "undone_at")[:limit]
    )
    return [
        {
            "id": str(row["id"]),
            "kind": row["kind"],
            "survivorId": str(row["survivor_id"]),
            "mergedId": str(row["merged_id"]),
            "mergedName": prompt_line(row["merged_name"]),
            "createdAt": row["created_at"],
            "undoneAt": row["undone_at"],
        }
        for row in rows
    ]


def entity_visible_ids(*, workspace_id: int, node_ids: list[int], audience: Audience = EVERYONE) -> list[int]:
    """The entities of `node_ids` that exist and the audience may see, in the order given."""
    from graphsvc.facts import visible_entity_and

    with connections["app"].cursor() as cursor:
        cursor.execute(
            f"SELECT n.id FROM graph_nodes n WHERE n.workspace_id = %(ws)s AND n.id = ANY(%(ids)s)"
            f"{visible_entity_and(audience)}",
            {"ws": workspace_id, "ids": node_ids, "viewer": audience.user_id},
        )
        found = {row[0] for row in cursor.fetchall()}
    return [node_id for node_id in dict.fromkeys(node_ids) if node_id in found]


def entity_merge_into(*, workspace_id: int, merge_id: int, node_id: int) -> bool:
    """Whether `merge_id` is a merge into entity `node_id`."""
    from graphsvc.models import GraphEntityMerge

    return GraphEntityMerge.objects.filter(
        workspace_id=workspace_id, id=merge_id, survivor_id=node_id, kind=GraphEntityMerge.Kind.MERGE
    ).exists()


def entity_detail(*, workspace_id: int, node_id: int, audience: Audience = EVERYONE) -> dict[str, Any]:
    from config.schemas import finite
    from graphsvc.facts import fact_visible_sql, reading_for
    from memories.prompt_text import prompt_line

    reading = reading_for(workspace_id=workspace_id, audience=audience)
    visible_fact = f" AND {fact_visible_sql('e')}" if audience.restricted else ""
    with connections["app"].cursor() as cursor:
        cursor.execute(ENTITY_SELECT + " WHERE n.workspace_id = %s AND n.id = %s", [workspace_id, node_id])
        data = _entity_json(cursor.fetchone())
        cursor.execute(
            "SELECT alias FROM graph_entity_aliases WHERE workspace_id = %s AND node_id = %s ORDER BY alias",
            [workspace_id, node_id],
        )
        data["aliases"] = [r[0] for r in cursor.fetchall()]
        cursor.execute(
            f"""
            SELECT e.id, s.label, e.edge_type, t.label, e.fact, {reading.decayed()}, e.valid_from, e.valid_to,
                   e.expired_at IS NULL AND e.valid_to IS NULL
            FROM graph_edges e JOIN graph_nodes s ON s.workspace_id = e.workspace_id AND s.id = e.from_node_id
                JOIN graph_nodes t ON t.workspace_id = e.workspace_id AND t.id = e.to_node_id
            WHERE e.workspace_id = %(ws)s AND e.origin = 'llm_entity'
              AND (e.from_node_id = %(n)s OR e.to_node_id = %(n)s){visible_fact}
            ORDER BY e.valid_from DESC NULLS LAST, e.id DESC LIMIT 100
            """,
            reading.params(n=node_id),
        )
        floor = reading.params()["floor"]
        data["facts"] = [
            {
                "id": str(edge_id),
                "source": prompt_line(s),
                "relation": rel,
                "target": prompt_line(t),
                "fact": prompt_line(f),
                "confidence": round(finite(c), 4),
                "retrievable": bool(current) and float(c) >= floor,
                "validFrom": vf,
                "validTo": vt,
            }
            for edge_id, s, rel, t, f, c, vf, vt, current in cursor.fetchall()
        ]
    data["merges"] = entity_merges(workspace_id=workspace_id, node_id=node_id)
    return data


def communities_list(*, workspace_id: int, limit: int, audience: Audience = EVERYONE) -> dict[str, Any]:
    """Communities, largest first. For a restricted audience, members it may not see are left out, and a
    community with any such member shows no summary and a name made of its visible members (both were written
    from every member)."""
    from graphsvc.facts import entity_visible_sql
    from graphsvc.models import GraphSettings

    member_visible = f" AND {entity_visible_sql('m.node_id')}" if audience.restricted else ""
    hidden = (
        f"""(SELECT count(*) FROM graph_community_members m WHERE m.workspace_id = c.workspace_id
              AND m.community_id = c.id AND NOT {entity_visible_sql("m.node_id")})"""
        if audience.restricted
        else "0"
    )
    with connections["app"].cursor() as cursor:
        cursor.execute(
            f"""
            SELECT c.id, c.name, c.summary, coalesce(s.size, 0),
                   ARRAY(SELECT n.label FROM graph_community_members m
                         JOIN graph_nodes n ON n.workspace_id = m.workspace_id AND n.id = m.node_id
                         WHERE m.workspace_id = c.workspace_id AND m.community_id = c.id{member_visible}
                         ORDER BY m.node_id LIMIT 20),
                   {hidden}
            FROM graph_communities c
            LEFT JOIN (SELECT community_id, count(*) AS size FROM graph_community_members
                       WHERE workspace_id = %(ws)s GROUP BY community_id) s ON s.community_id = c.id
            WHERE c.workspace_id = %(ws)s
            ORDER BY coalesce(s.size, 0) DESC, c.id LIMIT %(limit)s
            """,
            {"ws": workspace_id, "limit": limit, "viewer": audience.user_id},
        )
        rows = cursor.fetchall()
    last = (
        GraphSettings.objects.filter(workspace_id=workspace_id)
        .values_list("communities_run_at", flat=True)
        .first()
    )
    communities = []
    for community_id, name, summary, size, members, hidden_count in rows:
        if hidden_count:
            if not members:
                continue
            name, summary, size = ", ".join(list(members)[:3]), "", size - hidden_count
        communities.append(
            {
                "id": str(community_id),
                "name": name,
                "summary": summary,
                "size": size,
                "members": list(members),
            }
        )
    return {"communities": communities, "lastRunAt": last}


def entity_graph_stats(*, workspace_id: int, audience: Audience = EVERYONE) -> dict[str, Any]:
    """Counts of the entity graph; a restricted audience counts only the entities, aliases, facts and
    communities it may see (a community with at least one visible member)."""
    from graphsvc.facts import entity_visible_sql, fact_visible_sql, reading_for
    from graphsvc.models import ENTITY_TYPES, GraphSettings

    reading = reading_for(workspace_id=workspace_id)
    fact = f" AND {fact_visible_sql('e')}" if audience.restricted else ""
    entity = f" AND {entity_visible_sql('n.id')}" if audience.restricted else ""
    alias = f" AND {entity_visible_sql('a.node_id')}" if audience.restricted else ""
    member = (
        f" AND EXISTS (SELECT 1 FROM graph_community_members m WHERE m.workspace_id = c.workspace_id "
        f"AND m.community_id = c.id AND {entity_visible_sql('m.node_id')})"
        if audience.restricted
        else ""
    )
    params = reading.params(types=list(ENTITY_TYPES))
    with connections["app"].cursor() as cursor:
        cursor.execute(
            f"""
            SELECT
              (SELECT count(*) FROM graph_entity_aliases a WHERE a.workspace_id = %(ws)s{alias}),
              (SELECT count(*) FROM graph_edges e WHERE e.workspace_id = %(ws)s AND e.origin = 'llm_entity'
                 AND e.expired_at IS NULL AND e.valid_to IS NULL{fact}),
              (SELECT count(*) FROM graph_edges e WHERE e.workspace_id = %(ws)s AND e.origin = 'llm_entity'
                 AND (e.expired_at IS NOT NULL OR e.valid_to IS NOT NULL){fact}),
              (SELECT count(*) FROM graph_edges e WHERE e.workspace_id = %(ws)s AND e.origin = 'llm_entity'
                 AND e.expired_at IS NULL AND e.valid_to IS NULL AND {reading.decayed()} < %(floor)s{fact}),
              (SELECT count(*) FROM graph_communities c WHERE c.workspace_id = %(ws)s{member})
            """,
            params,
        )
        aliases, active, invalidated, below, communities = cursor.fetchone()
        cursor.execute(
            "SELECT n.node_type, count(*) FROM graph_nodes n WHERE n.workspace_id = %(ws)s "
            f"AND n.node_type = ANY(%(types)s) AND n.archived_at IS NULL{entity} "
            "GROUP BY n.node_type ORDER BY n.node_type",
            params,
        )
        by_type = dict(cursor.fetchall())
        cursor.execute(
            "SELECT e.edge_type, count(*) FROM graph_edges e WHERE e.workspace_id = %(ws)s "
            f"AND e.origin = 'llm_entity' AND e.expired_at IS NULL AND e.valid_to IS NULL{fact} "
            "GROUP BY e.edge_type ORDER BY 2 DESC, 1 LIMIT 10",
            params,
        )
        relations = dict(cursor.fetchall())
    last = (
        GraphSettings.objects.filter(workspace_id=workspace_id)
        .values_list("last_eviction", flat=True)
        .first()
    )
    return {
        "entities": sum(by_type.values()),
        "aliases": aliases,
        "activeFacts": active,
        "invalidatedFacts": invalidated,
        "belowFloorFacts": below,
        "communities": communities,
        "entitiesByType": by_type,
        "topRelations": relations,
        "lastEviction": last,
    }


def graph_settings_get(*, workspace_id: int) -> dict[str, Any]:
    from django.conf import settings

    from graphsvc.models import GraphSettings

    row = GraphSettings.objects.filter(workspace_id=workspace_id).first()
    return {
        "recallStrategy": row.recall_strategy
        if row
        else (
            settings.GRAPH_RECALL_STRATEGY
            if settings.GRAPH_RECALL_STRATEGY in ("bfs", "spreading")
            else "bfs"
        ),
        "decayRate": row.decay_rate if row and row.decay_rate is not None else settings.GRAPH_DECAY_RATE,
        "decayRates": (row.decay_rates if row else None) or {},
        "maxEntities": row.max_entities if row else None,
    }


def communities_recall(
    *,
    workspace_id: int,
    seed_ids: list[int],
    vector: Any = None,
    model: str = "",
    limit: int = 3,
    audience: Audience = EVERYONE,
) -> list[dict[str, Any]]:
    """The summarised communities a query may draw on, in one statement: those of its seed entities, and the
    `limit` whose centroid (of `model`) is nearest to the query `vector`. Each with its cosine to the query
    (None without a centroid match), whether a seed is a member, its size and up to 20 member ids. A
    restricted audience sees a community only when it may see every member (communities_list's rule: the
    summary was written from all of them)."""
    from graphsvc.facts import entity_visible_sql

    by_centroid = "SELECT NULL::bigint AS id, NULL::float8 AS cosine WHERE false"
    params: dict[str, Any] = {
        "ws": workspace_id,
        "seeds": seed_ids,
        "limit": limit,
        "model": model,
        "viewer": audience.user_id,
    }
    if vector is not None:
        from graphsvc.vectors import vector_literal

        params.update(v=vector_literal(vector), dims=len(list(vector)))
        by_centroid = """
            SELECT c.id, 1 - (c.centroid <=> %(v)s::vector) AS cosine FROM graph_communities c
            WHERE c.workspace_id = %(ws)s AND c.summary <> '' AND c.centroid_model = %(model)s
              AND vector_dims(c.centroid) = %(dims)s
            ORDER BY c.centroid <=> %(v)s::vector LIMIT %(limit)s"""
    hidden = (
        f"""AND NOT EXISTS (SELECT 1 FROM graph_community_members m WHERE m.workspace_id = %(ws)s
                 AND m.community_id = c.id AND NOT {entity_visible_sql("m.node_id")})"""
        if audience.restricted
        else ""
    )
    with connections["app"].cursor() as cursor:
        cursor.execute(
            f"""
            WITH by_seed AS (
                SELECT DISTINCT m.community_id AS id FROM graph_community_members m
                WHERE m.workspace_id = %(ws)s AND m.node_id = ANY(%(seeds)s)
            ),
            by_centroid AS ({by_centroid}),
            cand AS (SELECT id FROM by_seed UNION SELECT id FROM by_centroid)
            SELECT c.id, c.name, c.summary, (SELECT b.cosine FROM by_centroid b WHERE b.id = c.id),
                   c.id IN (SELECT id FROM by_seed),
                   (SELECT count(*) FROM graph_community_members m
                    WHERE m.workspace_id = %(ws)s AND m.community_id = c.id),
                   ARRAY(SELECT m.node_id FROM graph_community_members m
                         WHERE m.workspace_id = %(ws)s AND m.community_id = c.id ORDER BY m.node_id LIMIT 20)
            FROM cand JOIN graph_communities c ON c.workspace_id = %(ws)s AND c.id = cand.id
            WHERE c.summary <> '' {hidden}
            ORDER BY c.id
            """,
            params,
        )
        rows = cursor.fetchall()
    return [
        {
            "id": community_id,
            "name": name,
            "summary": summary,
            "cosine": None if cosine is None else float(cosine),
            "seeded": bool(seeded),
            "size": int(size),
            "memberIds": [str(m) for m in members],
        }
        for community_id, name, summary, cosine, seeded, size, members in rows
    ]


def llm_usage_since(*, workspace_id: int, since: datetime) -> dict[str, Any]:
    """LLM calls, tokens and cost of a workspace since a moment (the dashboard's "this week")."""
    with connections["app"].cursor() as cursor:
        cursor.execute(
            """
            SELECT coalesce(sum(prompt_tokens + completion_tokens), 0), coalesce(sum(cost_usd), 0), count(*),
                   count(*) FILTER (WHERE NOT ok)
            FROM llm_usage WHERE workspace_id = %(ws)s AND created_at >= %(since)s
            """,
            {"ws": workspace_id, "since": since},
        )
        tokens, cost, calls, failed = cursor.fetchone()
    return {"tokens": int(tokens), "costUsd": float(cost), "calls": calls, "failedCalls": failed}
