from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from memories.models import Memory, MemoryEmbedding
from pipeline import jobs
from pipeline.services import jobs_run_pending
from tenancy.models import Workspace
from tenancy.policy import OPERATOR, declare
from tenancy.rls import workspace_context

BATCH = 256


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Embed memories that have no vector for the current EMBEDDING_MODEL (after changing the model), "
        "with a progress bar. Search only uses vectors of the current model, so until this finishes semantic "
        "search reports partial_vector_coverage and hybrid search still finds the rest by their words."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--workspace", type=int, action="append", help="Workspace id (repeatable); default all."
        )
        parser.add_argument("--model", default=None, help="Model to embed with (default EMBEDDING_MODEL).")
        parser.add_argument(
            "--enqueue", action="store_true", help="Queue jobs for the workers instead of running here."
        )
        parser.add_argument(
            "--default-only",
            action="store_true",
            help="Only memories that follow the configured model (no embeddingModel of their own); "
            "what `make run` uses, so an explicit per-memory choice is never overridden.",
        )
        parser.add_argument(
            "--drop-other-models",
            action="store_true",
            help="Afterwards delete vectors of other models in these workspaces.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        model = options["model"] or settings.EMBEDDING_MODEL
        workspace_ids = options["workspace"] or list(
            Workspace.objects.order_by("id").values_list("id", flat=True)
        )
        total = 0
        for workspace_id in workspace_ids:
            with workspace_context(workspace_id):
                candidates = Memory.objects.filter(workspace_id=workspace_id, deleted_at__isnull=True)
                if options["default_only"]:
                    candidates = candidates.filter(embedding_model__isnull=True)
                missing = list(candidates.exclude(embeddings__model=model).values_list("id", flat=True))
            if not missing:
                continue
            total += len(missing)
            bar = tqdm(
                total=len(missing), desc=f"workspace {workspace_id}", file=self.stderr, mininterval=0.5
            )
            for start in range(0, len(missing), BATCH):
                batch = missing[start : start + BATCH]
                with workspace_context(workspace_id):
                    Memory.objects.filter(
                        workspace_id=workspace_id, pk__in=batch, embedding_model__isnull=False
                    ).exclude(embedding_model=model).update(embedding_model=None)
                    jobs.jobs_enqueue(
                        workspace_id=workspace_id, memory_ids=batch, kind=jobs.Kind.EMBED, model=model
                    )
                if not options["enqueue"]:
                    jobs_run_pending(workspace_id=workspace_id)
                bar.update(len(batch))
            bar.close()
            if options["drop_other_models"] and not options["enqueue"]:
                with workspace_context(workspace_id):
                    MemoryEmbedding.objects.filter(workspace_id=workspace_id).exclude(model=model).delete()
        if options["enqueue"]:
            self.stdout.write(f"model {model}: {total} memories queued for the workers")
        else:
            self.stdout.write(f"done: model {model}, {total} memories embedded")
