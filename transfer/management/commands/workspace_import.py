import json
import sys
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from config.errors import ApiError
from tenancy.models import Workspace
from tenancy.policy import OPERATOR, declare
from transfer import services


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Import a workspace_export file into a workspace (the same or another): ids remapped, existing rows "
        "skipped, all or nothing. Prints the counts as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workspace_id", type=int, help="Id of the workspace to import into.")
        parser.add_argument("file", help="The export file ('-': stdin).")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: Any, **options: Any) -> None:
        workspace_id = options["workspace_id"]
        if not Workspace.objects.filter(pk=workspace_id).exists():
            raise CommandError(f"No workspace with id {workspace_id}.")
        source = sys.stdin.buffer if options["file"] == "-" else open(options["file"], "rb")  # noqa: SIM115
        bar = None
        if not options["no_progress"] and source is not sys.stdin.buffer:
            total = sum(1 for _ in source)
            source.seek(0)
            bar = tqdm(total=total, desc=f"import into {workspace_id}", file=self.stderr, mininterval=0.5)

        def lines() -> Iterator[bytes]:
            for line in source:
                if bar is not None:
                    bar.update()
                yield line

        try:
            report = services.workspace_import(workspace_id=workspace_id, lines=lines())
        except ApiError as exc:
            raise CommandError(exc.message) from None
        finally:
            if source is not sys.stdin.buffer:
                source.close()
        if bar is not None:
            bar.close()
        self.stdout.write(json.dumps({"workspaceId": workspace_id, **report.as_dict()}))
