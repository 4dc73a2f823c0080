"""Each mutating SDK route run by an org's owner, admin, member and read-only key, and by an outsider: the
status follows the role the route declares, and a refused call changes nothing in the org.

alice owns acme, dave is its admin, bob a member (his admin-scoped key still acts as a member); bob's read key
is the read role; charlie is an outsider, whose calls naming acme's project land in his own workspace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client

from graphsvc.models import GraphSettings
from memories.models import Memory, MemorySettings
from rollout.models import RolloutConfig
from tenancy import policy, services
from tenancy.models import ApiKey
from tenancy.rls import workspace_context
from tests.conftest import API, SdkClient, make_user
from tests.memories.helpers import ACME_SCOPE

ACTORS = ("owner", "admin", "member", "reader")


@dataclass
class Org:
    workspace_id: int
    clients: dict[str, SdkClient]
    outsider: SdkClient
    shared_memory_id: str
    other_memory_id: str


@pytest.fixture
def org(personas) -> Org:
    dave = make_user("dave")
    services.membership_set(org=personas.acme, user=dave, role="admin")
    reader_key = services.api_key_create(user=personas.bob, scope="read").raw_key
    clients = {
        "owner": personas.alice_api,
        "admin": SdkClient(Client(), services.api_key_create(user=dave, scope="admin").raw_key),
        "member": personas.bob_api,
        "reader": SdkClient(Client(), reader_key),
    }
    memory = personas.alice_api.add("Deploys go out on Tuesdays", scope=ACME_SCOPE)
    other = personas.alice_api.add("Deploys go out on Fridays", scope=ACME_SCOPE)
    return Org(personas.acme.id, clients, personas.charlie_api, memory["id"], other["id"])


def snapshot(workspace_id: int) -> dict[str, Any]:
    """What a refused call must leave as it was."""
    with workspace_context(workspace_id):
        memories = sorted(
            Memory.objects.values_list("id", "content", "deleted_at", "superseded_by", "metadata")
        )
        memory_settings = list(MemorySettings.objects.values())
        graph_settings = list(GraphSettings.objects.values())
        rollout = list(RolloutConfig.objects.values("mode", "autopilot_enabled"))
    return {"memories": memories, "memory": memory_settings, "graph": graph_settings, "rollout": rollout}


def call(client: SdkClient, method: str, path: str, body: Any) -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {client.key}"}
    if method == "PATCH":
        return client.client.patch(
            f"{API}/{path}", json.dumps(body), content_type="application/json", **headers
        )
    if path == "workspace/import":
        return client.client.post(
            f"{API}/{path}?projectId={ACME_SCOPE['projectId']}",
            body,
            content_type="application/x-ndjson",
            **headers,
        )
    return client.client.post(f"{API}/{path}", json.dumps(body), content_type="application/json", **headers)


def scoped(body: dict[str, Any], **scope: str) -> dict[str, Any]:
    return {**body, "scope": {**ACME_SCOPE, **scope}}


# (method, path, role it needs, body builder); the bodies target acme through its project.
ROUTES: list[tuple[str, str, str, Any]] = [
    ("POST", "memories/add", policy.WRITE, lambda o: scoped({"content": "matrix note"})),
    (
        "POST",
        "memories/edit",
        policy.WRITE,
        lambda o: scoped({"id": o.shared_memory_id, "content": "edited"}),
    ),
    ("POST", "memories/forget", policy.WRITE, lambda o: scoped({"id": o.shared_memory_id})),
    (
        "POST",
        "memories/resolve",
        policy.WRITE,
        lambda o: scoped(
            {"action": "supersedes", "memoryId": o.shared_memory_id, "otherMemoryId": o.other_memory_id}
        ),
    ),
    ("POST", "memories/bulk-forget", policy.WRITE, lambda o: scoped({"filters": {"all": True}}, userId="u1")),
    ("POST", "memories/bulk-forget", policy.ADMIN, lambda o: scoped({"filters": {"all": True}})),
    ("POST", "memories/vacuum", policy.ADMIN, lambda o: scoped({})),
    ("POST", "memories/consolidate", policy.ADMIN, lambda o: scoped({})),
    ("PATCH", "memories/settings", policy.ADMIN, lambda o: scoped({"redactCredentials": False})),
    ("PATCH", "graph/extraction", policy.ADMIN, lambda o: scoped({"dailyTokenBudget": 1000})),
    ("POST", "graph/clear", policy.ADMIN, lambda o: scoped({"confirm": "delete entity graph"})),
    ("POST", "graph/decay", policy.ADMIN, lambda o: scoped({"action": "set_rate", "rate": 0.5})),
    ("PATCH", "graph/settings", policy.ADMIN, lambda o: scoped({"maxEntities": 10})),
    ("POST", "graph/communities", policy.ADMIN, lambda o: scoped({"refresh": True})),
    (
        "POST",
        "graph/entities/merge",
        policy.ADMIN,
        lambda o: scoped({"into": "Payments Gateway", "entities": ["Payments Gw"]}),
    ),
    (
        "POST",
        "graph/entities/split",
        policy.ADMIN,
        lambda o: scoped({"entity": "Payments Gateway", "name": "Payments API", "aliases": ["payments gw"]}),
    ),
    ("POST", "graph/backfill", policy.ADMIN, lambda o: scoped({})),
    ("POST", "graph/rollout", policy.ADMIN, lambda o: scoped({"mode": "shadow"})),
    ("PATCH", "graph/rollout", policy.ADMIN, lambda o: scoped({"autopilotEnabled": True})),
    ("POST", "sessions/start", policy.WRITE, lambda o: scoped({"title": "matrix session"})),
    ("POST", "skills/files/upsert", policy.WRITE, lambda o: scoped({"path": "skills/m.md", "content": "m"})),
    ("POST", "workspace/export", policy.ADMIN, lambda o: scoped({})),
    ("POST", "workspace/import", policy.ADMIN, lambda o: b'{"kind": "header"}\n'),
]
HELD = {"owner": policy.OWNER, "admin": policy.ADMIN, "member": policy.WRITE, "reader": policy.READ}


@pytest.mark.parametrize(
    ("method", "path", "needed", "body"), ROUTES, ids=[f"{m} {p} {n}" for m, p, n, _ in ROUTES]
)
@pytest.mark.parametrize("actor", ACTORS)
def test_it_lets_a_role_do_what_the_route_needs_and_nothing_more(org, actor, method, path, needed, body):
    before = snapshot(org.workspace_id)
    response = call(org.clients[actor], method, path, body(org))
    if policy.allows(HELD[actor], needed):
        assert response.status_code != 403, response.content
        assert response.status_code < 500, response.content
    else:
        assert response.status_code == 403, response.content
        error = response.json()["error"]
        # The message names the role needed (the route's declared one when the key's scope is already short).
        required = error["details"]["requiredRole"]
        assert error["code"] == "FORBIDDEN_ROLE" and policy.level(required) > policy.level(HELD[actor])
        assert required in error["message"]
        assert snapshot(org.workspace_id) == before


@pytest.mark.parametrize(
    ("method", "path", "needed", "body"), ROUTES, ids=[f"{m} {p} {n}" for m, p, n, _ in ROUTES]
)
def test_it_never_lets_an_outsider_change_the_org(org, method, path, needed, body):
    before = snapshot(org.workspace_id)
    response = call(org.outsider, method, path, body(org))
    # Naming acme's project routes charlie to his own workspace; acme's memory ids are not found there.
    assert response.status_code < 500, response.content
    if path in {"memories/edit", "memories/forget", "memories/resolve"}:
        assert response.status_code == 404
    assert snapshot(org.workspace_id) == before


def test_it_follows_a_membership_change_on_the_next_call(org, personas):
    bob = org.clients["member"]
    assert bob.post("memories/add", scoped({"content": "while a member"})).status_code == 201
    services.membership_role_change(org=personas.acme, user=personas.bob, role="admin")
    assert call(bob, "PATCH", "graph/rollout", scoped({"autopilotEnabled": True})).status_code == 200
    services.membership_remove(org=personas.acme, user=personas.bob)
    before = snapshot(org.workspace_id)
    # No longer a member: the project routes bob to his own workspace, and acme is out of reach.
    assert bob.post("memories/forget", scoped({"id": org.shared_memory_id})).status_code == 404
    assert snapshot(org.workspace_id) == before


def test_it_lets_keys_manage_only_their_own_user_within_their_scope(org, personas):
    reader, member = org.clients["reader"], org.clients["member"]
    refused = reader.post("keys/create", {"keyScope": "read"})
    assert refused.status_code == 403 and refused.json()["error"]["details"]["requiredRole"] == "admin"
    created = member.ok("keys/create", {"name": "ci", "keyScope": "write"}, status=201)
    assert created["secret"].startswith("mem_") and created["key"]["keyScope"] == "write"
    listed = member.ok("keys/list", {})
    assert created["key"]["id"] in {key["id"] for key in listed["keys"]}
    assert all("secret" not in key for key in listed["keys"])
    # Not someone else's key, and a pin needs admin in the workspace: bob is only a member of acme.
    alice_key = org.clients["owner"].ok("keys/list", {})["keys"][0]["id"]
    assert member.post("keys/revoke", {"id": alice_key}).status_code == 404
    pinned = member.post("keys/create", {"keyScope": "write", "pinned": True, "scope": ACME_SCOPE})
    assert pinned.status_code == 403
    assert member.ok("keys/revoke", {"id": created["key"]["id"]})["revoked"] is True
    revoked_key = SdkClient(Client(), created["secret"])
    assert revoked_key.post("memories/add", {"content": "x"}).status_code == 401


def test_it_never_makes_a_key_stronger_than_the_one_asking(personas):
    write_key = SdkClient(Client(), services.api_key_create(user=personas.alice, scope="write").raw_key)
    response = write_key.post("keys/create", {"keyScope": "admin"})
    assert response.status_code == 403


def test_it_keeps_a_pinned_key_in_its_workspace(org, personas):
    owner = org.clients["owner"]
    created = owner.ok("keys/create", {"keyScope": "admin", "pinned": True, "scope": ACME_SCOPE}, status=201)
    assert created["key"]["pinnedWorkspace"]["id"] == org.workspace_id
    pinned = SdkClient(Client(), created["secret"])
    # Without a project it still acts in acme (not alice's personal workspace), and no tenantId reaches out.
    memory = pinned.add("pinned to acme")
    with workspace_context(org.workspace_id):
        assert Memory.objects.filter(pk=memory["id"]).exists()
    escaped = pinned.post("memories/add", {"content": "x", "scope": {"tenantId": "elsewhere"}})
    assert escaped.status_code == 403 and escaped.json()["error"]["code"] == "KEY_PINNED"
    # When alice leaves acme (another owner stays), the pinned key loses it on the next call.
    services.membership_set(org=personas.acme, user=personas.bob, role="owner")
    services.membership_remove(org=personas.acme, user=personas.alice)
    gone = pinned.post("memories/add", {"content": "after leaving"})
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "WORKSPACE_NOT_FOUND"


# --- keys/* by pinned and unpinned keys of every scope ------------------------------------------------------

KEY_ROUTES = ("keys/create", "keys/list", "keys/revoke")
KEY_SCOPES = ("read", "write", "admin")


@dataclass
class KeyWorld:
    caller: SdkClient
    unpinned_id: str  # another key of alice's, not pinned
    acme_pinned_id: str  # another key of alice's, pinned to acme
    personal_pinned_id: str  # another key of alice's, pinned to her personal workspace


def key_world(personas: Any, *, scope: str, pinned: bool) -> KeyWorld:
    alice = personas.alice
    personal = services.personal_workspace_ensure(user=alice)
    caller_key = services.api_key_create(user=alice, scope=scope, workspace=personas.acme if pinned else None)
    unpinned = services.api_key_create(user=alice, scope="read").api_key
    acme_pinned = services.api_key_create(user=alice, scope="read", workspace=personas.acme).api_key
    personal_pinned = services.api_key_create(user=alice, scope="read", workspace=personal).api_key
    return KeyWorld(
        SdkClient(Client(), caller_key.raw_key),
        str(unpinned.id),
        str(acme_pinned.id),
        str(personal_pinned.id),
    )


@pytest.mark.parametrize("route", KEY_ROUTES)
@pytest.mark.parametrize("pinned", [False, True], ids=["unpinned", "pinned"])
@pytest.mark.parametrize("scope", KEY_SCOPES)
def test_it_keeps_keys_routes_within_the_calling_keys_scope_and_pin(personas, route, pinned, scope):
    world = key_world(personas, scope=scope, pinned=pinned)
    caller = world.caller
    if scope != "admin":
        body = {"keyScope": "read"} if route == "keys/create" else {}
        if route == "keys/revoke":
            body = {"id": world.unpinned_id}
        error = caller.error(route, body, status=403, code="FORBIDDEN_ROLE")
        assert error["details"] == {"requiredRole": "admin", "heldRole": scope}
        assert ApiKey.objects.filter(revoked_at__isnull=False).count() == 0
        return
    if route == "keys/create":
        if pinned:
            refused = caller.error("keys/create", {"keyScope": "read"}, status=403, code="KEY_PINNED")
            assert "pinned: true" in refused["message"]
            elsewhere = {"keyScope": "read", "pinned": True, "scope": {"tenantId": "globex-like"}}
            caller.error("keys/create", elsewhere, status=403, code="KEY_PINNED")
            made = caller.ok("keys/create", {"keyScope": "write", "pinned": True}, status=201)
            assert made["key"]["pinnedWorkspace"]["id"] == personas.acme.id
        else:
            made = caller.ok("keys/create", {"keyScope": "write"}, status=201)
            assert made["key"]["pinnedWorkspace"] is None
        assert made["key"]["keyScope"] == "write"
    elif route == "keys/list":
        listed = {key["id"] for key in caller.ok("keys/list", {})["keys"]}
        if pinned:
            assert world.acme_pinned_id in listed
            assert world.unpinned_id not in listed and world.personal_pinned_id not in listed
            assert all(
                key["pinnedWorkspace"]["id"] == personas.acme.id for key in caller.ok("keys/list", {})["keys"]
            )
        else:
            assert {world.unpinned_id, world.acme_pinned_id, world.personal_pinned_id} <= listed
    else:
        others = (world.unpinned_id, world.personal_pinned_id)
        for other in others:
            if pinned:
                caller.error("keys/revoke", {"id": other}, status=404, code="KEY_NOT_FOUND")
            else:
                assert caller.ok("keys/revoke", {"id": other})["revoked"] is True
        assert caller.ok("keys/revoke", {"id": world.acme_pinned_id})["revoked"] is True
        revoked = set(ApiKey.objects.filter(revoked_at__isnull=False).values_list("id", flat=True))
        expected = {world.acme_pinned_id, *([] if pinned else others)}
        assert {str(key_id) for key_id in revoked} == expected


def test_it_keeps_a_key_minted_by_a_pinned_key_out_of_other_tenants(personas):
    alice = personas.alice_api
    alice.add("globex-adjacent secret", scope={"tenantId": "other-tenant"})
    alice.add("acme note", scope=ACME_SCOPE)
    pinned = SdkClient(
        Client(), services.api_key_create(user=personas.alice, scope="admin", workspace=personas.acme).raw_key
    )
    minted = pinned.ok("keys/create", {"keyScope": "admin", "pinned": True}, status=201)
    assert minted["key"]["pinnedWorkspace"]["id"] == personas.acme.id
    child = SdkClient(Client(), minted["secret"])
    child.error(
        "memories/search",
        {"query": "secret", "scope": {"tenantId": "other-tenant"}},
        status=403,
        code="KEY_PINNED",
    )
    # The child acts in acme: acme's project note is what it lists (the project only narrows the read).
    found = child.ok("memories/list", {"scope": ACME_SCOPE})["memories"]
    assert [memory["content"] for memory in found] == ["acme note"]
    # Its own keys/create is held to the pin too: no unpinned grandchild.
    child.error("keys/create", {"keyScope": "read"}, status=403, code="KEY_PINNED")


def test_it_refuses_keys_routes_to_a_pinned_key_without_admin_in_its_workspace(personas):
    # bob is a member of acme: his admin-scoped key pinned there acts as write, short of what keys/* need.
    pinned = services.api_key_create(user=personas.bob, scope="admin", workspace=personas.acme).raw_key
    bob = SdkClient(Client(), pinned)
    for route, body in (("keys/list", {}), ("keys/create", {"keyScope": "read", "pinned": True})):
        error = bob.error(route, body, status=403, code="FORBIDDEN_ROLE")
        assert error["details"] == {"requiredRole": "admin", "heldRole": "write"}
