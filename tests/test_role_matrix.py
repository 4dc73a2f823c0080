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
