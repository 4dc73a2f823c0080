"""Writes on per-workspace graph settings, and the supersedes edges of memory consolidation."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import connections

from config.errors import ApiError
from graphsvc.models import GraphSettings


def graph_settings_update(*, workspace_id: int, llm_daily_token_budget: int | None) -> GraphSettings:
    """Call inside the workspace's RLS context. A workspace may lower its budget but never raise it above the
    operator's ceiling (GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX)."""
    ceiling = settings.GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX
    if ceiling and llm_daily_token_budget is not None and llm_daily_token_budget > ceiling:
        raise ApiError(
            400,
            "TOKEN_BUDGET_ABOVE_CEILING",
            f"dailyTokenBudget may be at most {ceiling:,} tokens on this server; send a lower number.",
            details={"ceiling": ceiling},
        )
    settings_row, _ = GraphSettings.objects.update_or_create(
        workspace_id=workspace_id, defaults={"llm_daily_token_budget": llm_daily_token_budget}
    )
    return settings_row


def supersedes_edges_add(*, workspace_id: int, pairs: list[tuple[uuid.UUID, uuid.UUID]]) -> int:
    """One `supersedes` edge winner → loser per consolidated pair (memories/consolidate); idempotent.

    Call inside the workspace's RLS context. Memories without a graph node (a failed mapping) are skipped.
    """
    if not pairs:
        return 0
    keys = sorted({str(memory_id) for pair in pairs for memory_id in pair})
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT node_key, id FROM graph_nodes WHERE workspace_id = %s AND node_type = 'memory' "
            "AND node_key = ANY(%s)",
            [workspace_id, keys],
        )
        node_by_memory = dict(cursor.fetchall())
        rows = [
            (node_by_memory[str(winner)], node_by_memory[str(loser)], winner)
            for winner, loser in pairs
            if str(winner) in node_by_memory and str(loser) in node_by_memory
        ]
        if not rows:
            return 0
        cursor.execute(
            """
            INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class,
                weight, confidence, evidence_memory_id, origin, created_at, updated_at, last_observed_at,
                retrieval_count)
            SELECT %s, 'c:supersedes:' || f || ':' || t, f, t, 'supersedes', 'temporal', 1.0, 1.0, w,
                   'consolidation', now(), now(), now(), 0
            FROM unnest(%s::bigint[], %s::bigint[], %s::uuid[]) AS e(f, t, w)
            ON CONFLICT (workspace_id, edge_key) WHERE expired_at IS NULL DO UPDATE
                SET last_observed_at = now()
            """,
            [workspace_id, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]],
        )
    return len(rows)


def graph_reasoning_settings_update(*, workspace_id: int, changes: dict[str, object]) -> GraphSettings:
    """Only the given fields (recall_strategy, decay_rate, max_entities). Call inside the workspace's RLS
    context."""
    allowed = {"recall_strategy", "decay_rate", "max_entities"}
    settings_row, _ = GraphSettings.objects.update_or_create(
        workspace_id=workspace_id, defaults={k: v for k, v in changes.items() if k in allowed}
    )
    return settings_row


def relation_decay_set(*, workspace_id: int, edge_type: str | None, rate: float | None) -> GraphSettings:
    """The decay rate of one relation (None removes its override), or the workspace default when edge_type is
    None."""
    settings_row, _ = GraphSettings.objects.get_or_create(workspace_id=workspace_id)
    if edge_type is None:
        settings_row.decay_rate = rate
    else:
        rates = dict(settings_row.decay_rates or {})
        if rate is None:
            rates.pop(edge_type, None)
        else:
            rates[edge_type] = rate
        settings_row.decay_rates = rates
    settings_row.save()
    return settings_row
