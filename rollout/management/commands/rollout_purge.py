"""Delete retrieval metrics past their retention now (the worker also does it hourly)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from rollout import services
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Delete retrieval metrics older than ROLLOUT_METRICS_RETENTION_DAYS (default 7) in every workspace."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help=f"Keep this many days instead (default {settings.ROLLOUT_METRICS_RETENTION_DAYS}).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if days is not None and days < 0:
            raise CommandError("--days must be 0 or more.")
        deleted = services.retrieval_metrics_purge(older_than_days=days)
        self.stdout.write(f"Deleted {deleted} retrieval metrics.")
