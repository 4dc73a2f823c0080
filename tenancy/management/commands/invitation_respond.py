from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenancy import selectors, services
from tenancy.management.commands._helpers import org_by_slug, user_by_username
from tenancy.models import Invitation
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = "Accept or decline, on a user's behalf, their pending invitation to an organization; or list them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True)
        parser.add_argument("--org", help="The organization's slug (needed to accept or decline).")
        action = parser.add_mutually_exclusive_group()
        action.add_argument("--accept", action="store_true")
        action.add_argument("--decline", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        user = user_by_username(options["username"])
        if not (options["accept"] or options["decline"]):
            for invitation in selectors.invitations_pending_for_user(user=user):
                self.stdout.write(
                    f"{invitation.org.slug}  {invitation.role}  since {invitation.created_at:%Y-%m-%d}"
                )
            return
        if not options["org"]:
            raise CommandError("Name the organization: --org SLUG.")
        org = org_by_slug(options["org"])
        pending = Invitation.objects.filter(org=org, user=user, status=Invitation.Status.PENDING).first()
        if pending is None:
            raise CommandError(f"{user.get_username()} has no pending invitation to {org.slug}.")
        try:
            if options["accept"]:
                membership = services.invitation_accept(invitation=pending, user=user)
                self.stdout.write(f"{user.get_username()} is {membership.role} of {org.slug}")
            else:
                services.invitation_decline(invitation=pending, user=user)
                self.stdout.write(f"{user.get_username()} declined {org.slug}")
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
