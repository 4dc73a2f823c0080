from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from tenancy.management.commands._helpers import user_by_username
from tenancy.models import ApiKey
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = "List API keys (prefix and last 4 only; the keys themselves are never stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", help="Only this user's keys.")

    def handle(self, *args: Any, **options: Any) -> None:
        keys = ApiKey.objects.select_related("user", "workspace").order_by("user__username", "-created_at")
        if options.get("username"):
            keys = keys.filter(user=user_by_username(options["username"]))
        now = timezone.now()
        for key in keys:
            if key.revoked_at:
                state = "revoked"
            elif key.expires_at <= now:
                state = "expired"
            else:
                state = "active"
            last_used = f"{key.last_used_at:%Y-%m-%d %H:%M}" if key.last_used_at else "never"
            pin = f"pinned to {key.workspace.name}" if key.workspace else "unpinned"
            self.stdout.write(
                f"{key.id}  {key.user.get_username():<20} {key.prefix}…{key.last4}  {key.scope:<5}  "
                f"{state:<8} expires {key.expires_at:%Y-%m-%d}  last used {last_used}  {pin}  {key.name}"
            )
