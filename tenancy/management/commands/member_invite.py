from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenancy import services
from tenancy.management.commands._helpers import org_by_slug, user_by_username
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Invite a user to an organization with a role; they become a member when they accept "
        "(dashboard: Invitations, or manage.py invitation_respond). member_set adds without asking."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--username", required=True)
        parser.add_argument("--role", default="member", choices=["owner", "admin", "member"])

    def handle(self, *args: Any, **options: Any) -> None:
        org = org_by_slug(options["org"])
        user = user_by_username(options["username"])
        try:
            invitation = services.invitation_create(org=org, user=user, role=options["role"], invited_by=None)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"invited {user.get_username()} to {org.slug} as {invitation.role} (#{invitation.id})"
        )
