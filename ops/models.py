"""Operational tables. Neither holds workspace data (no content, no workspace, user or key identity), so, like
django-q2's own tables, they carry no workspace_id and no row-level security: /metrics and /readyz must read
them across the whole service without choosing a workspace."""

from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """One row per qcluster process, refreshed every OPS_HEARTBEAT_SECONDS; /readyz wants a recent one."""

    worker = models.CharField(max_length=200, primary_key=True)  # "<host>:<pid>"
    cluster = models.CharField(max_length=100)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField()

    class Meta:
        db_table = "ops_worker_heartbeats"


class MetricCounter(models.Model):
    """A monotonically growing number shared by every process (workers on other hosts included), exported on
    /metrics. Labels are low-cardinality names only (job kind, outcome, model): never a workspace, user or
    key."""

    name = models.CharField(max_length=100)
    labels = models.JSONField(default=dict)
    value = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "ops_metric_counters"
        constraints = [models.UniqueConstraint(fields=["name", "labels"], name="ops_metric_counters_unique")]
