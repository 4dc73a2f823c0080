from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from graphsvc import llm
from pipeline.graph_jobs import graph_backfill
from tenancy.models import Workspace
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Run LLM extraction (memory relationships, entities and facts) for memories that never had it — "
        "written before GRAPH_LLM_MODEL was set, or dead-lettered — here, with a progress bar. "
        "Injection-flagged memories are never sent to the model. Uses the workspace's token budget like the "
        "workers do. The SDK route graph/backfill runs the same for one workspace as a background job."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--workspace", type=int, action="append", help="Workspace id (repeatable); default all."
        )
        parser.add_argument("--limit", type=int, default=None, help="At most this many memories in all.")
        parser.add_argument(
            "--enqueue", action="store_true", help="Queue jobs for the workers instead of running here."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not llm.llm_enabled():
            raise CommandError("No GRAPH_LLM_MODEL is configured: set it (and GRAPH_LLM_API_BASE/KEY) first.")
        limit = options["limit"]
        if limit is not None and limit < 1:
            raise CommandError("--limit must be at least 1")
        workspace_ids = options["workspace"] or list(
            Workspace.objects.order_by("id").values_list("id", flat=True)
        )
        total = 0
        for workspace_id in workspace_ids:
            remaining = None if limit is None else limit - total
            if remaining == 0:
                break
            bar = tqdm(desc=f"workspace {workspace_id}", file=self.stderr, mininterval=0.5, leave=False)

            def show(done: int, count: int, bar: Any = bar) -> None:
                bar.total = count
                bar.n = done
                bar.refresh()

            try:
                total += graph_backfill(
                    workspace_id=workspace_id, limit=remaining, enqueue=options["enqueue"], progress=show
                )
            finally:
                bar.close()
        self.stdout.write(f"done: {total} memories {'queued' if options['enqueue'] else 'extracted'}")
