import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from memories.repair import stored_rows_repair
from memories.selectors import unreadable_rows_forget
from tenancy.models import Workspace
from tenancy.policy import OPERATOR, declare
from tenancy.rls import workspace_context


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Repair stored rows reads cannot serve as stored (graph/status UNREADABLE_ROWS): times outside years "
        "1-9999 UTC, metadata deeper than 20 levels, numbers that are not finite, re-wrapped graph metadata; "
        "and scans again the injection flags of memories an older detector scanned. "
        "Prints what changed per workspace as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workspace_id", type=int, nargs="?", help="One workspace (default: every one).")

    def handle(self, *args: Any, **options: Any) -> None:
        ids = list(Workspace.objects.order_by("id").values_list("id", flat=True))
        if options["workspace_id"] is not None:
            if options["workspace_id"] not in ids:
                raise CommandError(f"No workspace with id {options['workspace_id']}.")
            ids = [options["workspace_id"]]
        for workspace_id in ids:
            with workspace_context(workspace_id), connections["app"].cursor() as cursor:
                repaired = stored_rows_repair(cursor, workspace_id=workspace_id)
            unreadable_rows_forget(workspace_id=workspace_id)
            if repaired:
                self.stdout.write(json.dumps({"workspaceId": workspace_id, "repaired": repaired}))
