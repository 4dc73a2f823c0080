"""tenancy.caller: the key check, the rate limit, the touch and the routing facts in one statement."""

from __future__ import annotations

from datetime import timedelta

from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.models import Memory
from tenancy import services
from tenancy.caller import caller_lookup
from tenancy.models import ApiKey, Membership, Workspace
from tenancy.rls import connection_on_citus, workspace_context


def landed_in(api, scope) -> int:
    memory_id = api.add("where did this go", scope=scope)["id"]
    for workspace in Workspace.objects.all():
        with workspace_context(workspace.id):
            if Memory.objects.filter(pk=memory_id).exists():
                return workspace.id
    raise AssertionError("memory not found in any workspace")


def test_it_checks_the_key_in_one_statement_before_the_write(personas):
    personas.alice_api.add("warm up")  # the first call touches last_used_at; the next ones must not
    with (
        CaptureQueriesContext(connections["app"]) as app,
        CaptureQueriesContext(connections["default"]) as owner,
    ):
        personas.alice_api.add("counted")
    before_write = []
    for query in app.captured_queries:
        if query["sql"].startswith(("BEGIN", "SAVEPOINT")):
            break
        before_write.append(query["sql"])
    # On Citus the reference table `workspaces` is read in a statement of its own (tenancy.caller._statement
    # says why); on a single node everything is one statement.
    expected = 2 if connection_on_citus() else 1
    assert len(before_write) == expected, before_write
    assert "rate_limit_counters" in before_write[0] and "api_keys" in before_write[0]
    if connection_on_citus():
        assert "FROM workspaces" in before_write[1] and "api_keys" not in before_write[1]
    assert owner.captured_queries == []
    # Planned once per connection (prepared), not on every request.
    with connections["app"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%rate_limit_counters%'"
        )
        assert cursor.fetchone()[0] == 1


def test_it_touches_a_key_at_most_once_a_minute(personas):
    created = services.api_key_create(user=personas.bob)
    now = timezone.now()
    first = caller_lookup(key_hash=created.api_key.key_hash, limit=100, window_seconds=60, now=now)
    assert first.api_key is not None and first.api_key.last_used_at == now
    assert ApiKey.objects.get(pk=created.api_key.pk).last_used_at == now
    later = now + timedelta(seconds=30)
    second = caller_lookup(key_hash=created.api_key.key_hash, limit=100, window_seconds=60, now=later)
    assert second.api_key.last_used_at == now
    assert ApiKey.objects.get(pk=created.api_key.pk).last_used_at == now
    much_later = now + timedelta(seconds=61)
    caller_lookup(key_hash=created.api_key.key_hash, limit=100, window_seconds=60, now=much_later)
    assert ApiKey.objects.get(pk=created.api_key.pk).last_used_at == much_later


def test_it_does_not_touch_revoked_rate_limited_or_inactive_callers(personas):
    revoked = services.api_key_create(user=personas.bob)
    services.api_key_revoke(api_key=revoked.api_key)
    lookup = caller_lookup(
        key_hash=revoked.api_key.key_hash, limit=100, window_seconds=60, now=timezone.now()
    )
    assert lookup.api_key is not None and lookup.api_key.revoked_at is not None
    assert ApiKey.objects.get(pk=revoked.api_key.pk).last_used_at is None

    limited = services.api_key_create(user=personas.bob)
    caller_lookup(key_hash=limited.api_key.key_hash, limit=0, window_seconds=60, now=timezone.now())
    assert ApiKey.objects.get(pk=limited.api_key.pk).last_used_at is None

    personas.charlie.is_active = False
    personas.charlie.save()
    inactive = services.api_key_create(user=personas.charlie)
    lookup = caller_lookup(
        key_hash=inactive.api_key.key_hash, limit=100, window_seconds=60, now=timezone.now()
    )
    assert lookup.user is not None and not lookup.user.is_active
    assert ApiKey.objects.get(pk=inactive.api_key.pk).last_used_at is None


def test_it_spends_the_budget_of_unknown_keys():
    now = timezone.now()
    first = caller_lookup(key_hash="f" * 64, limit=1, window_seconds=60, now=now, clock=1_000_000.0)
    second = caller_lookup(key_hash="f" * 64, limit=1, window_seconds=60, now=now, clock=1_000_015.0)
    assert first.api_key is None and first.user is None and first.rate.allowed
    assert not second.rate.allowed and second.rate.retry_after_seconds == 5


def test_it_returns_the_user_with_the_key(personas):
    created = services.api_key_create(user=personas.alice)
    lookup = caller_lookup(
        key_hash=created.api_key.key_hash, limit=100, window_seconds=60, now=timezone.now()
    )
    assert lookup.user.pk == personas.alice.pk and lookup.user.get_username() == "alice"
    assert lookup.api_key.pk == created.api_key.pk and lookup.api_key.user is lookup.user
    assert lookup.personal_workspace_id == personas.alice.personal_workspace.id
    assert lookup.active_org_id is None


def test_it_routes_to_the_active_org_only_while_the_caller_is_a_member(personas):
    services.active_org_set(user=personas.bob, org=personas.acme)
    assert landed_in(personas.bob_api, {}) == personas.acme.id
    # A local projectId in auto mode goes to the personal workspace, whatever the active org.
    assert landed_in(personas.bob_api, {"projectId": "local-notes"}) == personas.bob.personal_workspace.id
    Membership.objects.filter(workspace=personas.acme, user=personas.bob).delete()
    assert landed_in(personas.bob_api, {}) == personas.bob.personal_workspace.id


def test_it_keeps_github_routing_and_tenants(personas):
    services.repo_owner_mapping_set(user=personas.alice, owner="octo", org=personas.acme)
    assert landed_in(personas.alice_api, {"projectId": "github.com/octo/api"}) == personas.acme.id
    first = landed_in(personas.alice_api, {"tenantId": "t-1"})
    assert Workspace.objects.get(pk=first).parent_id == personas.alice.personal_workspace.id
    assert landed_in(personas.alice_api, {"tenantId": "t-1"}) == first
    # charlie's tenant of the same name is his own, never alice's.
    charlies = landed_in(personas.charlie_api, {"tenantId": "t-1"})
    assert charlies != first
    assert Workspace.objects.get(pk=charlies).parent_id == personas.charlie.personal_workspace.id


def test_it_provisions_a_personal_workspace_for_users_without_one(personas):
    Workspace.objects.filter(pk=personas.bob.personal_workspace.id).delete()
    created = landed_in(personas.bob_api, {})
    assert Workspace.objects.get(pk=created).personal_owner_id == personas.bob.pk
