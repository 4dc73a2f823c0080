"""Writes on per-workspace graph settings."""

from __future__ import annotations

from graphsvc.models import GraphSettings


def graph_settings_update(*, workspace_id: int, llm_daily_token_budget: int | None) -> GraphSettings:
    """Call inside the workspace's RLS context."""
    settings_row, _ = GraphSettings.objects.update_or_create(
        workspace_id=workspace_id, defaults={"llm_daily_token_budget": llm_daily_token_budget}
    )
    return settings_row
