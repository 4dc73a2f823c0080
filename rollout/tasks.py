"""django-q2 entry points of the rollout app; the worker runs them from the 'rollout-metrics-purge'
Schedule."""

from __future__ import annotations

from rollout import services


def retrieval_metrics_purge() -> int:
    """Hourly: delete retrieval metrics older than ROLLOUT_METRICS_RETENTION_DAYS (7). Safe to run twice."""
    return services.retrieval_metrics_purge()
