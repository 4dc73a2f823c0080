from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from tenancy import policy, services
from tenancy.management.commands._helpers import user_by_username, workspace_for_pin
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = "Create an SDK API key for a user and print it (it is shown only this once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True)
        parser.add_argument("--days", type=int, default=None, help="Days until the key expires (default 90).")
        parser.add_argument("--name", default="", help="A label to recognise the key by.")
        parser.add_argument(
            "--scope",
            choices=policy.KEY_SCOPES,
            default=policy.DEFAULT_KEY_SCOPE,
            help="What the key may do: read, write (default) or admin; never more than the user's role.",
        )
        parser.add_argument(
            "--workspace",
            default=None,
            help="Pin the key to one workspace: an org slug, 'personal', or a workspace id. Default: no pin.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = user_by_username(options["username"])
        expires_at = timezone.now() + timedelta(days=options["days"]) if options["days"] else None
        workspace = workspace_for_pin(user, options["workspace"]) if options["workspace"] else None
        try:
            created = services.api_key_create(
                user=user,
                expires_at=expires_at,
                name=options["name"],
                scope=options["scope"],
                workspace=workspace,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        key = created.api_key
        pin = f", pinned to {workspace.name}" if workspace else ""
        self.stderr.write(
            f"{key.scope} key {key.id} for {user.get_username()}{pin}, "
            f"expires {key.expires_at:%Y-%m-%d %H:%M} UTC"
        )
        self.stdout.write(created.raw_key)
