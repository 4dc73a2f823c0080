from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from pipeline.services import jobs_run_pending
from tenancy.models import Workspace
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = "Run queued pipeline jobs (embedding, similarity edges) now, in this process, instead of a worker."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--workspace", type=int, action="append", help="Workspace id (repeatable); default all."
        )
        parser.add_argument(
            "--include-delayed", action="store_true", help="Also run retries waiting for backoff."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workspace_ids = options["workspace"] or list(
            Workspace.objects.order_by("id").values_list("id", flat=True)
        )
        total = 0
        for workspace_id in workspace_ids:
            ran = jobs_run_pending(workspace_id=workspace_id, include_delayed=options["include_delayed"])
            if ran:
                self.stdout.write(f"workspace {workspace_id}: ran {ran} jobs")
            total += ran
        self.stdout.write(f"done: {total} jobs")
