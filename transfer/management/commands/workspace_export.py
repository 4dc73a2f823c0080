import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from tenancy.models import Workspace
from tenancy.policy import OPERATOR, declare
from transfer import export


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Export one workspace as versioned JSON Lines (memories, graph, aliases, communities, rollout "
        "settings) to a file or stdout, with a progress bar on stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workspace_id", type=int, help="Id of the workspace to export.")
        parser.add_argument("--output", "-o", default="-", help="File to write (default '-': stdout).")
        parser.add_argument("--embeddings", action="store_true", help="Include vectors (larger file).")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: Any, **options: Any) -> None:
        workspace_id = options["workspace_id"]
        if not Workspace.objects.filter(pk=workspace_id).exists():
            raise CommandError(
                f"No workspace with id {workspace_id}. List them with `manage.py apikey_list`."
            )
        total = export.workspace_export_count(workspace_id=workspace_id)
        bar = (
            None
            if options["no_progress"]
            else tqdm(total=total, desc=f"workspace {workspace_id}", file=self.stderr, mininterval=0.5)
        )
        target = sys.stdout.buffer if options["output"] == "-" else open(options["output"], "wb")  # noqa: SIM115
        lines = 0
        try:
            for line in export.workspace_export_lines(
                workspace_id=workspace_id, include_embeddings=options["embeddings"]
            ):
                target.write(line)
                lines += 1
                if bar is not None:
                    bar.update()
        finally:
            if target is not sys.stdout.buffer:
                target.close()
        if bar is not None:
            bar.close()
        self.stderr.write(f"Exported {lines} lines from workspace {workspace_id}.")
