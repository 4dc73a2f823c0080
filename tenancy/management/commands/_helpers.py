"""Small lookups shared by the tenancy commands, failing with a CommandError that says what to fix."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.management.base import CommandError

from tenancy import selectors
from tenancy.models import Workspace


def user_by_username(username: str) -> User:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(
            f"No user {username!r}. Create one with: manage.py createsuperuser or the demo setup."
        )
    return user


def org_by_slug(slug: str) -> Workspace:
    org = selectors.org_by_slug(slug=slug.strip().lower())
    if org is None:
        raise CommandError(
            f"No organization {slug!r}. Create it with: manage.py org_create {slug} --owner USER"
        )
    return org


def workspace_for_pin(user: User, raw: str) -> Workspace:
    """An org by slug, the user's personal workspace ('personal'), or any workspace by id."""
    raw = raw.strip()
    if raw == "personal":
        workspace = selectors.personal_workspace_get(user=user)
    elif raw.isascii() and raw.isdigit():
        workspace = Workspace.objects.filter(pk=int(raw)).first()
    else:
        workspace = selectors.org_by_slug(slug=raw.lower())
    if workspace is None:
        raise CommandError(f"No workspace {raw!r}: give an org slug, 'personal' or a workspace id.")
    return workspace
