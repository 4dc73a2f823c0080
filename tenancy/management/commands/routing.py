from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenancy import selectors, services
from tenancy.management.commands._helpers import org_by_slug, user_by_username
from tenancy.models import RepoOwnerMapping
from tenancy.policy import OPERATOR, declare


@declare(OPERATOR)
class Command(BaseCommand):
    help = (
        "Show or change a user's repo → workspace routing: mode (auto | active_workspace), the active org, "
        "and GitHub owner → org mappings (at most 50)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True)
        parser.add_argument("--mode", choices=["auto", "active_workspace"])
        parser.add_argument("--active-org", help="Org slug, or 'none' to use the personal workspace.")
        parser.add_argument("--map", nargs=2, metavar=("OWNER", "ORG"), help="Route repos of OWNER to ORG.")
        parser.add_argument("--unmap", metavar="OWNER", help="Remove the mapping for OWNER.")

    def handle(self, *args: Any, **options: Any) -> None:
        user = user_by_username(options["username"])
        try:
            if options.get("mode"):
                services.routing_mode_set(user=user, mode=options["mode"])
            if options.get("active_org"):
                org = None if options["active_org"] == "none" else org_by_slug(options["active_org"])
                services.active_org_set(user=user, org=org)
            if options.get("map"):
                owner, slug = options["map"]
                services.repo_owner_mapping_set(user=user, owner=owner, org=org_by_slug(slug))
            if options.get("unmap"):
                services.repo_owner_mapping_delete(user=user, owner=options["unmap"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        user_settings = selectors.user_settings_get(user=user)
        active = user_settings.active_org.slug if user_settings.active_org else "(personal)"
        self.stdout.write(f"mode: {user_settings.routing_mode}\nactive org: {active}")
        for mapping in RepoOwnerMapping.objects.filter(user=user).select_related("org").order_by("owner"):
            self.stdout.write(f"map: {mapping.owner} -> {mapping.org.slug}")
