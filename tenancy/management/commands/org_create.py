from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenancy import services
from tenancy.management.commands._helpers import user_by_username
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = "Create an organization workspace owned by a user."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="GitHub-owner-shaped handle, e.g. acme.")
        parser.add_argument("--owner", required=True, help="Username of the owner.")
        parser.add_argument("--name", default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        owner = user_by_username(options["owner"])
        try:
            org = services.org_create(owner=owner, slug=options["slug"], name=options["name"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"created org {org.slug} (workspace {org.id})")
