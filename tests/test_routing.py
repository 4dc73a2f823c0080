"""Scope → workspace: tenantId provisioning and repo routing."""

from __future__ import annotations

import pytest

from tenancy import services
from tenancy.models import Workspace
from tenancy.routing import MAX_OWNER_MAPPINGS, github_owner_from_project, normalize_owner
from tests.conftest import make_user


@pytest.mark.parametrize(
    ("project_id", "owner"),
    [
        ("github.com/acme/api", "acme"),
        ("https://github.com/Acme/api.git", "acme"),
        ("git@github.com:acme/api.git", "acme"),
        ("http://github.com/acme/api/tree/main", "acme"),
        ("gitlab.com/acme/api", None),
        ("github.com/acme", None),
        ("my-local-project", None),
        ("", None),
    ],
)
def test_it_parses_github_owners(project_id, owner):
    assert github_owner_from_project(project_id) == owner


def test_it_normalizes_and_validates_owners():
    assert normalize_owner("  @Acme-Platform ") == "acme-platform"
    for bad in ["-acme", "acme_corp", "a" * 40, ""]:
        with pytest.raises(ValueError):
            normalize_owner(bad)


def workspace_of(api, scope) -> int:
    """Write a memory with `scope` and find which workspace it landed in."""
    from memories.models import Memory
    from tenancy.rls import workspace_context

    memory_id = api.add("probe", scope=scope)["id"]
    for workspace in Workspace.objects.all():
        with workspace_context(workspace.id):
            if Memory.objects.filter(pk=memory_id).exists():
                return workspace.id
    raise AssertionError("memory not found in any workspace")


def test_it_uses_the_personal_workspace_by_default(personas):
    assert workspace_of(personas.alice_api, {}) == personas.alice.personal_workspace.id


def test_it_routes_a_repo_to_the_org_with_that_slug(personas):
    assert workspace_of(personas.bob_api, {"projectId": "github.com/acme/api"}) == personas.acme.id


def test_it_never_routes_outsiders_into_an_org(personas):
    # charlie is not in acme: a projectId naming acme lands in his personal workspace.
    assert workspace_of(personas.charlie_api, {"projectId": "github.com/acme/api"}) == (
        personas.charlie.personal_workspace.id
    )


def test_it_follows_explicit_owner_mappings(personas):
    services.repo_owner_mapping_set(user=personas.alice, owner="@Acme-Platform", org=personas.acme)
    assert (
        workspace_of(personas.alice_api, {"projectId": "github.com/acme-platform/backend"})
        == personas.acme.id
    )


def test_it_ignores_mappings_after_membership_ends(personas):
    services.repo_owner_mapping_set(user=personas.bob, owner="acme-platform", org=personas.acme)
    personas.acme.memberships.filter(user=personas.bob).delete()
    assert workspace_of(personas.bob_api, {"projectId": "github.com/acme-platform/x"}) == (
        personas.bob.personal_workspace.id
    )


def test_it_refuses_mappings_to_orgs_the_user_is_not_in(personas):
    with pytest.raises(ValueError, match="not a member"):
        services.repo_owner_mapping_set(user=personas.charlie, owner="acme", org=personas.acme)


def test_it_caps_owner_mappings(personas):
    for index in range(MAX_OWNER_MAPPINGS):
        services.repo_owner_mapping_set(user=personas.alice, owner=f"owner{index}", org=personas.acme)
    with pytest.raises(ValueError, match="at most"):
        services.repo_owner_mapping_set(user=personas.alice, owner="one-too-many", org=personas.acme)
    # Re-pointing an existing owner is not a new mapping.
    services.repo_owner_mapping_set(user=personas.alice, owner="owner1", org=personas.acme)


def test_it_sends_unparsable_projects_to_personal(personas):
    services.active_org_set(user=personas.alice, org=personas.acme)
    assert (
        workspace_of(personas.alice_api, {"projectId": "local-notes"}) == personas.alice.personal_workspace.id
    )


def test_it_uses_the_active_org_without_a_project(personas):
    services.active_org_set(user=personas.alice, org=personas.acme)
    assert workspace_of(personas.alice_api, {}) == personas.acme.id


def test_it_uses_the_active_org_in_active_workspace_mode(personas):
    services.routing_mode_set(user=personas.alice, mode="active_workspace")
    services.active_org_set(user=personas.alice, org=personas.acme)
    assert workspace_of(personas.alice_api, {"projectId": "github.com/someone-else/x"}) == personas.acme.id


def test_it_provisions_one_tenant_workspace_per_tenant_id(personas):
    first = workspace_of(personas.alice_api, {"tenantId": "customer-1"})
    again = workspace_of(personas.alice_api, {"tenantId": "customer-1"})
    other = workspace_of(personas.alice_api, {"tenantId": "customer-2"})
    assert first == again != other
    tenant = Workspace.objects.get(pk=first)
    assert tenant.kind == "sdk_tenant" and tenant.parent_id == personas.alice.personal_workspace.id


def test_it_keeps_the_same_tenant_id_apart_between_owners(personas):
    alice_tenant = workspace_of(personas.alice_api, {"tenantId": "shared-name"})
    charlie_tenant = workspace_of(personas.charlie_api, {"tenantId": "shared-name"})
    assert alice_tenant != charlie_tenant
    memory = personas.alice_api.add("alice's customer data", scope={"tenantId": "shared-name"})
    found = personas.charlie_api.ok(
        "memories/search", {"query": "customer", "scope": {"tenantId": "shared-name"}}
    )
    assert memory["id"] not in [m["id"] for m in found["memories"]]


def test_it_shares_org_tenants_between_members(personas):
    services.active_org_set(user=personas.alice, org=personas.acme)
    services.active_org_set(user=personas.bob, org=personas.acme)
    memory = personas.alice_api.add("acme customer note", scope={"tenantId": "cust-9"})
    found = personas.bob_api.ok("memories/search", {"query": "customer", "scope": {"tenantId": "cust-9"}})
    assert [m["id"] for m in found["memories"]] == [memory["id"]]


def test_it_can_refuse_unknown_tenants(personas, settings):
    settings.SDK_AUTO_PROVISION_TENANTS = False
    personas.alice_api.error(
        "memories/list", {"scope": {"tenantId": "nobody"}}, status=404, code="TENANT_NOT_FOUND"
    )


def test_it_caps_tenants_per_owner(personas, settings):
    settings.MAX_TENANT_WORKSPACES_PER_OWNER = 2
    personas.alice_api.ok("memories/list", {"scope": {"tenantId": "t1"}})
    personas.alice_api.ok("memories/list", {"scope": {"tenantId": "t2"}})
    personas.alice_api.error(
        "memories/list", {"scope": {"tenantId": "t3"}}, status=409, code="TENANT_LIMIT_REACHED"
    )


def test_it_validates_scope_fields(alice_api):
    alice_api.error("memories/list", {"scope": {"tenantId": "x" * 121}}, status=400, code="TENANT_ID_INVALID")
    alice_api.error("memories/list", {"scope": {"userId": ""}}, status=400, code="USER_ID_INVALID")
    alice_api.error("memories/list", {"scope": {"projectId": "p" * 241}}, status=400, code="INVALID_REQUEST")
    alice_api.error("memories/list", {"scope": {"orgId": 1}}, status=400, code="INVALID_REQUEST")


def test_it_creates_a_personal_workspace_with_every_user():
    user = make_user("dora")
    workspace = Workspace.objects.get(personal_owner=user)
    assert workspace.kind == "personal"
    assert workspace.memberships.get().role == "owner"
