from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from tenancy import services
from tenancy.management.commands._helpers import user_by_username
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = "Create an SDK API key for a user and print it (it is shown only this once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True)
        parser.add_argument("--days", type=int, default=None, help="Days until the key expires (default 90).")
        parser.add_argument("--name", default="", help="A label to recognise the key by.")

    def handle(self, *args: Any, **options: Any) -> None:
        user = user_by_username(options["username"])
        expires_at = timezone.now() + timedelta(days=options["days"]) if options["days"] else None
        try:
            created = services.api_key_create(user=user, expires_at=expires_at, name=options["name"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        key = created.api_key
        self.stderr.write(
            f"key {key.id} for {user.get_username()}, expires {key.expires_at:%Y-%m-%d %H:%M} UTC"
        )
        self.stdout.write(created.raw_key)
