from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Exists, OuterRef
from tqdm import tqdm

from graphsvc import llm
from memories.models import Memory, PipelineJob
from pipeline import jobs
from pipeline import services as pipeline
from tenancy.models import Workspace
from tenancy.policy import OPERATOR, declare
from tenancy.rls import workspace_context


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Run LLM extraction (memory relationships, entities and facts) for memories that never had it — "
        "written before GRAPH_LLM_MODEL was set, or dead-lettered — here, with a progress bar. "
        "Injection-flagged memories are never sent to the model. Uses the workspace's token budget like the "
        "workers do."
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
            total += self._backfill(workspace_id, remaining, enqueue=options["enqueue"])
        self.stdout.write(f"done: {total} memories {'queued' if options['enqueue'] else 'extracted'}")

    def _backfill(self, workspace_id: int, limit: int | None, *, enqueue: bool) -> int:
        done = PipelineJob.objects.filter(
            memory_id=OuterRef("pk"),
            kind=jobs.Kind.EXTRACT,
            status__in=[jobs.Status.SUCCEEDED, jobs.Status.QUEUED, jobs.Status.PROCESSING],
        )
        with workspace_context(workspace_id):
            pending = (
                Memory.objects.filter(workspace_id=workspace_id, deleted_at__isnull=True, injection_flags=[])
                .exclude(Exists(done))
                .order_by("created_at", "id")
                .values_list("id", flat=True)
            )
            memory_ids = list(pending[:limit] if limit is not None else pending)
        if not memory_ids:
            return 0
        bar = tqdm(total=len(memory_ids), desc=f"workspace {workspace_id}", file=self.stderr, mininterval=0.5)
        for memory_id in memory_ids:
            with workspace_context(workspace_id):
                job_ids = [
                    job_id
                    for kind in (jobs.Kind.RELATE, jobs.Kind.EXTRACT)
                    for job_id in jobs.jobs_enqueue(
                        workspace_id=workspace_id, memory_ids=[memory_id], kind=kind, push=enqueue
                    )
                ]
            if not enqueue:
                for job_id in job_ids:
                    pipeline.job_run(workspace_id=workspace_id, job_id=job_id)
            bar.update()
        bar.close()
        return len(memory_ids)
