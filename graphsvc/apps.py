from django.apps import AppConfig

UPKEEP_SCHEDULE_NAME = "graph-upkeep"
UPKEEP_TASK = "graphsvc.tasks.graph_upkeep"


class GraphsvcConfig(AppConfig):
    name = "graphsvc"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        # After migrate (not at import): ready() must not touch a database that may not exist yet.
        post_migrate.connect(upkeep_schedule_ensure, sender=self)


def upkeep_schedule_ensure(using: str = "default", **kwargs: object) -> None:
    """One hourly django-q Schedule row for graph upkeep, first run an hour out (a fresh database has nothing to do)."""
    from datetime import timedelta

    from django.db import connections
    from django.utils import timezone
    from django_q.models import Schedule

    if Schedule._meta.db_table not in connections[using].introspection.table_names():
        return
    existing = Schedule.objects.using(using).filter(name=UPKEEP_SCHEDULE_NAME).order_by("id")
    if not existing.exists():
        Schedule.objects.using(using).create(
            name=UPKEEP_SCHEDULE_NAME, func=UPKEEP_TASK, schedule_type=Schedule.HOURLY, repeats=-1,
            next_run=timezone.now() + timedelta(hours=1),
        )
