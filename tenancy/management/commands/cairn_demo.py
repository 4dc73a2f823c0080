from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.utils import timezone

from config.embedded_db import var_dir
from tenancy import selectors, services
from tenancy.models import ApiKey
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Development only: make the demo user, org 'demo' and an API key, and print the key on its own line. "
        "Run again, it reuses them and prints the same key while it is valid."
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
        self.stderr.write("Demo user 'demo' (password demo-password), org 'demo'. Demo API key:")
        self.stdout.write(raw_key)

    def _still_valid(self, raw_key: str) -> bool:
        key = ApiKey.objects.filter(key_hash=services.api_key_hash(raw_key)).first()
        if key is None or key.revoked_at is not None or key.scope != "admin":
            return False
        return key.expires_at > timezone.now() + timedelta(hours=1)
