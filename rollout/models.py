"""Per-workspace rollout of graph retrieval: the mode, the default-strategy policy, and one metrics row per
retrieval that feeds the quality gate. All workspace data, under FORCE row-level security."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from tenancy.models import Workspace, WorkspaceRow


class RolloutConfig(WorkspaceRow):
    """One row per workspace, written on the first change; a workspace without one is in
    ROLLOUT_DEFAULT_MODE."""

    class Mode(models.TextChoices):
        OFF = "off"
        SHADOW = "shadow"
        CANARY = "canary"

    # The workspace is the key (scale path: every key starts with workspace_id).
    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, primary_key=True, related_name="+")
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.OFF)
    # The mode autopilot (writes the plan's recommendedMode) is opt-in per workspace.
    autopilot_enabled = models.BooleanField(default=False)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.CharField(max_length=64, null=True, blank=True)

    class Meta:
        db_table = "rollout_configs"


class RetrievalPolicy(WorkspaceRow):
    """The default retrieval strategy of context/get when the caller names none, and its autopilot's
    memory."""

    class Strategy(models.TextChoices):
        LEXICAL = "lexical"
        HYBRID = "hybrid"

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, primary_key=True, related_name="+")
    default_strategy = models.CharField(max_length=16, choices=Strategy.choices, default=Strategy.LEXICAL)
    # Consecutive evaluation windows in which the workspace was ready for hybrid-by-default.
    ready_window_streak = models.IntegerField(default=0)
    last_decision = models.CharField(max_length=40, null=True, blank=True)
    last_evaluated_at = models.DateTimeField(null=True, blank=True)
    # Start of the window last evaluated: a second evaluation in the same window does not advance the streak.
    last_window_start = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.CharField(max_length=64, null=True, blank=True)
    default_autopilot_enabled = models.BooleanField(default=True)

    class Meta:
        db_table = "retrieval_policies"


class RetrievalMetric(WorkspaceRow):
    """One row per context/get or graph/trace call; kept ROLLOUT_METRICS_RETENTION_DAYS (purged hourly)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    mode = models.CharField(max_length=16)
    requested_strategy = models.CharField(
        max_length=16
    )  # lexical | semantic | hybrid (hybrid = graph requested)
    applied_strategy = models.CharField(
        max_length=16
    )  # hybrid_graph when graph expansion was applied, else baseline
    shadow_executed = models.BooleanField(default=False)
    baseline_candidates = models.IntegerField(default=0)
    graph_candidates = models.IntegerField(default=0)
    graph_expanded_count = models.IntegerField(default=0)
    total_candidates = models.IntegerField(default=0)
    fallback_triggered = models.BooleanField(default=False)
    fallback_reason = models.CharField(max_length=40, null=True, blank=True)
    project_id = models.CharField(max_length=240, null=True, blank=True)
    user_id = models.CharField(max_length=120, null=True, blank=True)
    semantic_model = models.CharField(max_length=160, null=True, blank=True)
    duration_ms = models.FloatField(default=0.0)
    endpoint = models.CharField(max_length=40)

    class Meta:
        db_table = "retrieval_metrics"
        indexes = [
            # The gate and shadowMetrics aggregate one workspace's rows over a time range; the purge deletes
            # by age.
            models.Index(fields=["workspace", "created_at"], name="retrieval_metrics_ws_time"),
            # "Last fallback" of shadowMetrics without scanning the window.
            models.Index(
                fields=["workspace", "created_at"],
                condition=Q(fallback_triggered=True),
                name="retrieval_metrics_fallbacks",
            ),
        ]
