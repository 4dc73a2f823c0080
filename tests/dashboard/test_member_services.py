"""tenancy.services member changes the dashboard relies on: an org never loses its last owner."""

from __future__ import annotations

import pytest

from tenancy import selectors, services
from tenancy.models import Membership, UserSettings
from tests.conftest import make_user


def test_it_changes_a_role(personas):
    services.membership_role_change(org=personas.acme, user=personas.bob, role="admin")
    assert Membership.objects.get(workspace=personas.acme, user=personas.bob).role == "admin"


def test_it_refuses_an_unknown_role_or_member(personas):
    with pytest.raises(ValueError, match="role must be one of"):
        services.membership_role_change(org=personas.acme, user=personas.bob, role="boss")
    with pytest.raises(ValueError, match="not a member"):
        services.membership_role_change(org=personas.acme, user=personas.charlie, role="member")
    with pytest.raises(ValueError, match="not a member"):
        services.membership_remove(org=personas.acme, user=personas.charlie)


def test_it_keeps_one_owner_but_lets_a_second_go(personas):
    with pytest.raises(ValueError, match="at least one owner"):
        services.membership_remove(org=personas.acme, user=personas.alice)
    services.membership_role_change(org=personas.acme, user=personas.bob, role="owner")
    services.membership_role_change(org=personas.acme, user=personas.alice, role="member")
    with pytest.raises(ValueError, match="at least one owner"):
        services.membership_role_change(org=personas.acme, user=personas.bob, role="admin")


def test_it_clears_routing_to_the_org_on_removal(personas):
    services.active_org_set(user=personas.bob, org=personas.acme)
    services.repo_owner_mapping_set(user=personas.bob, owner="acme-inc", org=personas.acme)
    services.membership_remove(org=personas.acme, user=personas.bob)
    assert UserSettings.objects.get(user=personas.bob).active_org is None
    assert selectors.repo_owner_mappings_for_user(user=personas.bob) == []


def test_it_finds_users_by_username_or_unique_email(personas):
    assert selectors.user_find(identifier="bob") == personas.bob
    assert selectors.user_find(identifier="  BOB@example.com ") == personas.bob
    twin = make_user("bob2")
    twin.email = "bob@example.com"
    twin.save()
    assert selectors.user_find(identifier="bob@example.com") is None  # ambiguous: say so rather than guess
    assert selectors.user_find(identifier="") is None
