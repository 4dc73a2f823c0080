"""Metrics are kept 7 days: an hourly worker schedule, a task and a management command delete older rows."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

from django.core.management import call_command
from django.utils import timezone
from django_q.models import Schedule

from rollout import services, tasks
from rollout.models import RetrievalMetric
from tenancy.rls import workspace_context
from tests.memories.helpers import personal_workspace_id
from tests.rollout.helpers import record


def metric_ages(ws: int) -> list[int]:
    with workspace_context(ws):
        return sorted(
            (timezone.now() - at).days for at in RetrievalMetric.objects.values_list("created_at", flat=True)
        )


def test_it_purges_only_metrics_older_than_seven_days(personas):
    alice, charlie = personal_workspace_id(personas.alice), personal_workspace_id(personas.charlie)
    for ws in (alice, charlie):
        record(ws, 2, at=timezone.now() - timedelta(days=8))
        record(ws, 1, at=timezone.now() - timedelta(days=6, hours=23))
        record(ws, 1)
    assert tasks.retrieval_metrics_purge() == 4
    assert metric_ages(alice) == [0, 6]
    assert metric_ages(charlie) == [0, 6]
    assert tasks.retrieval_metrics_purge() == 0  # safe to run twice


def test_it_does_not_purge_on_insert(ws):
    record(ws, 1, at=timezone.now() - timedelta(days=30))
    record(ws, 1)
    assert len(metric_ages(ws)) == 2


def test_it_purges_from_the_command(ws):
    record(ws, 1, at=timezone.now() - timedelta(days=3))
    record(ws, 1)
    out = StringIO()
    call_command("rollout_purge", "--days", "2", stdout=out)
    assert "Deleted 1 retrieval metrics" in out.getvalue()
    assert metric_ages(ws) == [0]


def test_it_schedules_the_purge_hourly_once():
    # migrate created it (post_migrate); the ensure calls below run on the runtime alias, whose test
    # transaction this test's queries share.
    (schedule,) = Schedule.objects.filter(name=services.PURGE_SCHEDULE_NAME)
    assert schedule.func == "rollout.tasks.retrieval_metrics_purge"
    assert schedule.schedule_type == Schedule.HOURLY and schedule.repeats == -1
    services.metrics_purge_schedule_ensure(using="app")
    services.metrics_purge_schedule_ensure(using="app")
    assert Schedule.objects.filter(name=services.PURGE_SCHEDULE_NAME).count() == 1


def test_it_repairs_a_changed_schedule():
    Schedule.objects.filter(name=services.PURGE_SCHEDULE_NAME).update(
        func="gone.task", schedule_type=Schedule.DAILY
    )
    services.metrics_purge_schedule_ensure(using="app")
    schedule = Schedule.objects.get(name=services.PURGE_SCHEDULE_NAME)
    assert schedule.func == services.PURGE_TASK and schedule.schedule_type == Schedule.HOURLY
