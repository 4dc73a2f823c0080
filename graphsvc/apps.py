from typing import Any

from django.apps import AppConfig

UPKEEP_SCHEDULE_NAME = "graph-upkeep"
UPKEEP_TASK = "graphsvc.tasks.graph_upkeep"


class GraphsvcConfig(AppConfig):
    name = "graphsvc"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate

        # After migrate (not at import): ready() must not touch a database that may not exist yet.
        post_migrate.connect(upkeep_schedule_ensure, sender=self)
        connection_created.connect(generic_plans_ensure)


def generic_plans_ensure(sender: object, connection: Any, **kwargs: object) -> None:
    """The runtime connection plans its prepared statements once (generic plans), never per call.

    Only the statements config.prepared.prepared_cursor runs are prepared (graph recall and traversal,
    expansion, contradictions, context/get's BM25; Django binds on the client and never prepares). PostgreSQL
    otherwise keeps planning a statement per call while a plan for the actual parameters looks cheaper than
    the generic one; the seed search and the one-statement recall by query (seeded_bfs) always look so, and
    planning costs more than running them (recall by query p50 8.4 ms with custom plans, 4.9 ms generic, in a
    recall loop on the bench's entity graph). Set on connect, in autocommit, so no rollback can undo it;
    PL/pgSQL triggers on this connection get generic plans too, which their id-keyed statements use anyway.
    Not set when GRAPH_PREPARED_STATEMENTS is off (a pooler in transaction mode would carry it to other
    clients)."""
    from django.conf import settings

    if connection.alias != "app" or connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
        on_citus = bool(cursor.fetchone()[0])
        # Read by the statements that are shaped differently on Citus (tenancy.rls.connection_on_citus).
        connection.cairn_on_citus = on_citus
        if settings.GRAPH_PREPARED_STATEMENTS and not on_citus:
            # Not on Citus: its planner prunes shards by the parameter values, which a generic plan has none
            # of (it refuses such plans), and keeps its own plan cache for the one-shard statements.
            cursor.execute("SET plan_cache_mode = force_generic_plan")


def upkeep_schedule_ensure(using: str = "default", **kwargs: object) -> None:
    """One hourly django-q Schedule row for graph upkeep, first run an hour out (a fresh database has nothing
    to do)."""
    from datetime import timedelta

    from django.db import connections
    from django.utils import timezone
    from django_q.models import Schedule

    if Schedule._meta.db_table not in connections[using].introspection.table_names():
        return
    existing = Schedule.objects.using(using).filter(name=UPKEEP_SCHEDULE_NAME).order_by("id")
    if not existing.exists():
        Schedule.objects.using(using).create(
            name=UPKEEP_SCHEDULE_NAME,
            func=UPKEEP_TASK,
            schedule_type=Schedule.HOURLY,
            repeats=-1,
            next_run=timezone.now() + timedelta(hours=1),
        )
