"""Request and response schemas of the graph routes owned by graphsvc."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from ninja import Schema
from pydantic import Field

from config.schemas import ScopeIn, ScopeQuery, StrictIn, scope_field


class LlmUsageOut(Schema):
    tokens: int = Field(description="Prompt + completion tokens since 00:00 UTC.")
    costUsd: float = Field(description="Cost since 00:00 UTC, from litellm's cost map (0 for unknown models).")
    calls: int = Field(description="LLM calls since 00:00 UTC.")
    failedCalls: int = Field(description="Of those, calls that failed (timeout, 429, invalid answer …).")


class LlmTotalOut(Schema):
    promptTokens: int = Field(description="All prompt tokens ever sent for this workspace.")
    completionTokens: int = Field(description="All completion tokens received.")
    costUsd: float = Field(description="All cost, from litellm's cost map.")
    calls: int = Field(description="All LLM calls, failed ones included.")


class ExtractionOut(Schema):
    enabled: bool = Field(description="False when no GRAPH_LLM_MODEL is configured.")
    model: str | None = Field(description="The litellm model used for extraction.")
    status: Literal["off", "active", "budget_exhausted"] = Field(
        description="budget_exhausted: today's token budget is spent and extraction jobs wait; nothing else stops."
    )
    message: str = Field(description="What the status means for this workspace.")
    dailyTokenBudget: int | None = Field(description="Tokens per UTC day (null: no limit).")
    budgetResetsAt: datetime = Field(description="Next 00:00 UTC.")
    today: LlmUsageOut = Field(description="Usage since 00:00 UTC.")
    total: LlmTotalOut = Field(description="Usage since the workspace began.")
    entities: int = Field(description="Entity nodes.")
    activeFacts: int = Field(description="Facts currently valid.")
    invalidatedFacts: int = Field(description="Facts replaced by a newer version (kept for point-in-time reads).")
    relationshipEdges: int = Field(description="LLM relationship edges between memories (contradicts, caused_by …).")


class ExtractionQuery(ScopeQuery):
    """graph/extraction takes only the scope."""


class ExtractionSettingsIn(StrictIn):
    scope: ScopeIn = scope_field()
    dailyTokenBudget: int | None = Field(
        ..., ge=1, le=10_000_000_000,
        description="Tokens per UTC day for this workspace's LLM extraction; null removes the limit "
        "(GRAPH_LLM_DAILY_TOKEN_BUDGET then applies).",
    )
