"""Reads on the graph: counts, hubs and health for graph/status."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import connections


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
                  AND NOT EXISTS (SELECT 1 FROM memory_node_links l WHERE l.workspace_id = n.workspace_id AND l.node_id = n.id)
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
                    WHERE workspace_id = %(ws)s AND expired_at IS NULL AND (expires_at IS NULL OR expires_at > now())
                    GROUP BY from_node_id
                    UNION ALL
                    SELECT to_node_id, 0, 0, count(*) FROM graph_edges
                    WHERE workspace_id = %(ws)s AND expired_at IS NULL AND (expires_at IS NULL OR expires_at > now())
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
    from django.conf import settings

    from graphsvc import llm
    from graphsvc.models import ENTITY_TYPES

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
              coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0), coalesce(sum(cost_usd), 0),
              count(*)
            FROM llm_usage WHERE workspace_id = %(ws)s
            """,
            {"ws": workspace_id, "day": day_start},
        )
        tokens_today, cost_today, calls_today, failed_today, prompt, completion, cost, calls = cursor.fetchone()
        cursor.execute(
            """
            SELECT
              (SELECT count(*) FROM graph_nodes WHERE workspace_id = %(ws)s AND node_type = ANY(%(types)s)),
              (SELECT count(*) FROM graph_edges WHERE workspace_id = %(ws)s AND origin = 'llm_entity'
                  AND expired_at IS NULL AND valid_to IS NULL),
              (SELECT count(*) FROM graph_edges WHERE workspace_id = %(ws)s AND origin = 'llm_entity'
                  AND (expired_at IS NOT NULL OR valid_to IS NOT NULL)),
              (SELECT count(*) FROM graph_edges WHERE workspace_id = %(ws)s
                  AND origin IN ('llm_pairwise', 'llm_semantic') AND expired_at IS NULL)
            """,
            {"ws": workspace_id, "types": list(ENTITY_TYPES)},
        )
        entities, active_facts, invalidated_facts, relationship_edges = cursor.fetchone()
    enabled = llm.llm_enabled()
    spent = budget is not None and tokens_today >= budget
    return {
        "enabled": enabled,
        "model": settings.GRAPH_LLM_MODEL or None,
        "status": "off" if not enabled else ("budget_exhausted" if spent else "active"),
        "message": (
            "No GRAPH_LLM_MODEL is configured: relationships and entities are not extracted; everything else works."
            if not enabled else
            "Today's token budget is spent: extraction is paused until it resets (or the budget is raised)."
            if spent else "Extraction runs after each memory is embedded."
        ),
        "dailyTokenBudget": budget,
        "budgetResetsAt": llm.next_budget_reset(),
        "today": {"tokens": int(tokens_today), "costUsd": float(cost_today), "calls": calls_today,
                  "failedCalls": failed_today},
        "total": {"promptTokens": int(prompt), "completionTokens": int(completion), "costUsd": float(cost),
                  "calls": calls},
        "entities": entities,
        "activeFacts": active_facts,
        "invalidatedFacts": invalidated_facts,
        "relationshipEdges": relationship_edges,
    }
