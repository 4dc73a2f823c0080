"""Writes on per-workspace graph settings."""

from __future__ import annotations

from graphsvc.models import GraphSettings


def graph_settings_update(*, workspace_id: int, llm_daily_token_budget: int | None) -> GraphSettings:
    """Call inside the workspace's RLS context."""
    settings_row, _ = GraphSettings.objects.update_or_create(
        workspace_id=workspace_id, defaults={"llm_daily_token_budget": llm_daily_token_budget}
    )
    return settings_row


def graph_reasoning_settings_update(*, workspace_id: int, changes: dict[str, object]) -> GraphSettings:
    """Only the given fields (recall_strategy, decay_rate, max_entities). Call inside the workspace's RLS context."""
    allowed = {"recall_strategy", "decay_rate", "max_entities"}
    settings_row, _ = GraphSettings.objects.update_or_create(
        workspace_id=workspace_id, defaults={k: v for k, v in changes.items() if k in allowed}
    )
    return settings_row


def relation_decay_set(*, workspace_id: int, edge_type: str | None, rate: float | None) -> GraphSettings:
    """The decay rate of one relation (None removes its override), or the workspace default when edge_type is None."""
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
