import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from config.embedded_db import var_dir
from memories.models import Memory
from memories.selectors import MemoryScope
from pipeline import services as pipeline
from rollout.models import RolloutConfig
from rollout.services import rollout_mode_set
from tenancy import selectors, services
from tenancy.models import ApiKey, Workspace
from tenancy.policy import OPERATOR, declare
from tenancy.rls import workspace_context

SAMPLES = Path(__file__).resolve().parents[3] / "memories" / "fixtures" / "agent-memories-300.jsonl"
# A handful of a coding agent's memories across its three repositories: enough for the explorer and
# context/get to show a graph at once, few enough to read.
SAMPLE_COUNT = 40
SAMPLE_TAG = "sample"


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Development only: make the demo user, org 'demo' (in canary) with sample memories, and an API key; "
        "print the key on its own line. Run again, it reuses them and prints the same key while it is valid. "
        "--remove-samples deletes the sample memories for good (they are not added again)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--remove-samples",
            action="store_true",
            help="Delete the demo's sample memories and keep them out.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.EMBEDDED_DATABASE:
            # A known user and password must never appear on a real deployment's database.
            self.stderr.write(
                "Demo skipped: DATABASE_URL is set, and the demo only runs on the embedded database."
            )
            return
        user_model = get_user_model()
        user = user_model.objects.filter(username="demo").first()
        if user is None:
            user = user_model.objects.create_user("demo", email="demo@example.com", password="demo-password")
        org = selectors.org_by_slug(slug="demo") or services.org_create(
            owner=user, slug="demo", name="Demo org"
        )
        services.active_org_set(user=user, org=org)
        if options["remove_samples"]:
            removed = samples_remove(workspace_id=org.id)
            (var_dir() / "demo_samples_removed").touch()
            self.stderr.write(f"Removed {removed} sample memories from the demo org; they stay out.")
            return
        self._canary(org)
        if not (var_dir() / "demo_samples_removed").exists():
            added = samples_add(workspace_id=org.id)
            if added:
                self.stderr.write(
                    f"Added {added} sample memories (tagged '{SAMPLE_TAG}') to the demo org; remove them "
                    "with "
                    "`.venv/bin/python manage.py cairn_demo --remove-samples`."
                )
        raw_key = self._key(user)
        bind = settings.DEMO_BASE_URL
        self.stderr.write(
            f"Dashboard: {bind}/ (sign in as demo / demo-password). API docs: {bind}/api/sdk/v1/docs\n"
            "Demo API key (admin scope, org 'demo'):"
        )
        self.stdout.write(raw_key)

    def _canary(self, org: Workspace) -> None:
        with workspace_context(org.id):
            configured = RolloutConfig.objects.filter(workspace_id=org.id).exists()
        if configured:
            return
        # A demo: graph retrieval on from the start, so context/get shows expansion before the quality gate
        # has traffic to judge. Real workspaces reach canary through the gate.
        rollout_mode_set(
            workspace_id=org.id, mode="canary", autopilot_enabled=None, updated_by="demo", enforce_gate=False
        )
        self.stderr.write("Demo org 'demo' set to canary (a demo: the quality gate is skipped this once).")

    def _key(self, user: User) -> str:
        # The key is kept in plain text under ./var for the demo only, so a second `make run` can print it
        # again.
        key_file = var_dir() / "demo_api_key"
        raw_key = key_file.read_text().strip() if key_file.exists() else ""
        if not raw_key or not self._still_valid(raw_key):
            raw_key = services.api_key_create(
                user=user,
                expires_at=timezone.now() + timedelta(days=90),
                name="demo",
                created_via="demo",
                scope="admin",  # the demo shows everything an owner can do
            ).raw_key
            key_file.write_text(raw_key)
            key_file.chmod(0o600)
        return raw_key

    def _still_valid(self, raw_key: str) -> bool:
        key = ApiKey.objects.filter(key_hash=services.api_key_hash(raw_key)).first()
        if key is None or key.revoked_at is not None or key.scope != "admin":
            return False
        return key.expires_at > timezone.now() + timedelta(hours=1)


def samples_add(*, workspace_id: int) -> int:
    """The first SAMPLE_COUNT memories of the fixture, marked as samples; none when the org has them
    already."""
    with workspace_context(workspace_id):
        if Memory.objects.filter(workspace_id=workspace_id, tags__contains=[SAMPLE_TAG]).exists():
            return 0
    lines = SAMPLES.read_text().splitlines()[:SAMPLE_COUNT]
    added = 0
    for line in lines:
        body = json.loads(line)
        scope = body.get("scope") or {}
        with workspace_context(workspace_id):
            pipeline.memory_add_flow(
                workspace_id=workspace_id,
                scope=MemoryScope(user_id=scope.get("userId"), project_id=scope.get("projectId")),
                content=body["content"],
                type=body.get("type", "note"),
                layer=body.get("layer"),
                tags=[*body.get("tags", []), SAMPLE_TAG],
                paths=[],
                category=body.get("category"),
                metadata={**(body.get("metadata") or {}), "sample": True},
                embedding_model=None,
            )
        added += 1
    return added


def samples_remove(*, workspace_id: int) -> int:
    """Delete the sample memories for good, with their graph and vectors."""
    with workspace_context(workspace_id):
        ids = list(
            Memory.objects.filter(workspace_id=workspace_id, tags__contains=[SAMPLE_TAG]).values_list(
                "id", flat=True
            )
        )
        pipeline.forget_side_effects(workspace_id=workspace_id, memory_ids=ids)
        Memory.objects.filter(workspace_id=workspace_id, id__in=ids).delete()
    return len(ids)
