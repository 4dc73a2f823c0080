"""POST memories/list: newest first, filters, cursor pagination, scope rules and workspace isolation."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

from django.utils import timezone

from memories.models import Memory
from tenancy.rls import workspace_context
from tests.memories.helpers import ACME_SCOPE, add_org_global, ids, personal_workspace_id


def listed(api, **fields):
    return api.ok("memories/list", fields)


def encoded(value) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def test_it_works(alice_api):
    first = alice_api.add("first")
    second = alice_api.add("second", type="rule")
    r = alice_api.post("memories/list", {})
    assert r.status_code == 200
    envelope = r.json()
    assert envelope["ok"] is True and envelope["meta"]["endpoint"] == "/api/sdk/v1/memories/list"
    assert envelope["data"] == {"memories": [second, first], "count": 2, "nextCursor": None}


def test_it_wants_a_json_object(alice_api):
    for body in ("", "null", "[]"):
        r = alice_api.post("memories/list", body)
        assert r.status_code == 400, body
        error = r.json()["error"]
        assert error["code"] == "INVALID_REQUEST"
        assert error["details"]["issues"][0]["field"] == "body"


def test_it_lists_twenty_by_default(alice_api):
    added = [alice_api.add(f"m{i}")["id"] for i in range(21)]
    data = listed(alice_api)
    assert data["count"] == 20
    assert ids(data["memories"]) == added[:0:-1]
    assert data["nextCursor"] is not None


def test_it_pages_with_cursors(alice_api):
    added = [alice_api.add(f"memory {i}")["id"] for i in range(25)]
    pages, cursor = [], None
    while True:
        data = listed(alice_api, limit=10, **({"cursor": cursor} if cursor else {}))
        pages.append(ids(data["memories"]))
        assert data["count"] == len(data["memories"])
        cursor = data["nextCursor"]
        if cursor is None:
            break
    assert [len(page) for page in pages] == [10, 10, 5]
    flat = [memory_id for page in pages for memory_id in page]
    assert len(set(flat)) == 25
    assert flat == added[::-1]


def test_it_ends_without_a_cursor_on_an_exact_page(alice_api):
    for i in range(10):
        alice_api.add(f"memory {i}")
    data = listed(alice_api, limit=5)
    assert data["count"] == 5 and data["nextCursor"] is not None
    data = listed(alice_api, limit=5, cursor=data["nextCursor"])
    assert data["count"] == 5 and data["nextCursor"] is None


def test_it_pages_through_memories_written_at_the_same_instant(personas):
    api = personas.alice_api
    added = {api.add(f"memory {i}")["id"] for i in range(7)}
    with workspace_context(personal_workspace_id(personas.alice)):
        Memory.objects.filter(pk__in=added).update(created_at=timezone.now() - timedelta(days=1))
    seen, cursor = [], None
    for _ in range(10):
        data = listed(api, limit=3, **({"cursor": cursor} if cursor else {}))
        seen += ids(data["memories"])
        cursor = data["nextCursor"]
        if cursor is None:
            break
    assert len(seen) == 7 and set(seen) == added
    assert seen == sorted(seen, reverse=True)


def test_it_keeps_its_place_when_new_memories_arrive(alice_api):
    older = [alice_api.add(f"old {i}")["id"] for i in range(4)]
    first = listed(alice_api, limit=2)
    alice_api.add("newer than the cursor")
    second = listed(alice_api, limit=2, cursor=first["nextCursor"])
    assert ids(first["memories"]) + ids(second["memories"]) == older[::-1]
    assert second["nextCursor"] is None


def test_it_filters_by_type_layer_and_tag(alice_api):
    rule = alice_api.add("Never commit secrets", type="rule", tags=["security"])
    working = alice_api.add("Reviewing PR 12", layer="working", tags=["review", "deploy"])
    fact = alice_api.add("Deploys take ten minutes", type="fact", tags=["deployment"])
    assert ids(listed(alice_api, type="rule")["memories"]) == [rule["id"]]
    assert ids(listed(alice_api, type="fact")["memories"]) == [fact["id"]]
    assert ids(listed(alice_api, layer="working")["memories"]) == [working["id"]]
    assert ids(listed(alice_api, layer="long_term")["memories"]) == [fact["id"]]
    assert ids(listed(alice_api, tags="deploy")["memories"]) == [fact["id"], working["id"]]
    assert ids(listed(alice_api, tags="secur")["memories"]) == [rule["id"]]
    assert ids(listed(alice_api, tags="deploy", layer="working")["memories"]) == [working["id"]]
    assert listed(alice_api, tags="nothing")["memories"] == []


def test_it_matches_tag_wildcards_literally(alice_api):
    percent = alice_api.add("a", tags=["100%"])
    underscore = alice_api.add("b", tags=["a_b"])
    alice_api.add("c", tags=["100x", "axb"])
    assert ids(listed(alice_api, tags="%")["memories"]) == [percent["id"]]
    assert ids(listed(alice_api, tags="a_b")["memories"]) == [underscore["id"]]


def test_it_validates_the_limit(alice_api):
    for i in range(3):
        alice_api.add(f"m{i}")
    assert listed(alice_api, limit=1)["count"] == 1
    assert listed(alice_api, limit=100)["count"] == 3
    for limit in (0, 101, -5, "ten"):
        error = alice_api.error("memories/list", {"limit": limit}, status=400, code="INVALID_REQUEST")
        assert error["details"]["issues"][0]["field"] == "limit"


def test_it_rejects_bad_cursors(alice_api):
    alice_api.add("m")
    bad = [
        "garbage",
        "!!!",
        encoded({"created": "2026-01-01"}),
        encoded(["not a date", "00000000-0000-0000-0000-000000000000"]),
        encoded(["2026-01-01T00:00:00+00:00", "not-a-uuid"]),
        encoded(["2026-01-01T00:00:00+00:00", 5]),
        encoded([5, "00000000-0000-0000-0000-000000000000"]),
        encoded(["2026-01-01T00:00:00", "00000000-0000-0000-0000-000000000000"]),
        encoded(["2026-01-01T00:00:00+00:00"]),
        encoded(None),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ]
    for cursor in bad:
        error = alice_api.error("memories/list", {"cursor": cursor}, status=400, code="INVALID_CURSOR")
        assert error["type"] == "validation_error"
    alice_api.error("memories/list", {"cursor": "c" * 201}, status=400, code="INVALID_REQUEST")


def test_it_names_unknown_fields(alice_api):
    error = alice_api.error("memories/list", {"offset": 20}, status=400, code="INVALID_REQUEST")
    assert error["details"]["issues"] == [
        {"field": "offset", "message": "unknown field; remove it", "type": "extra_forbidden"}
    ]
    alice_api.error("memories/list", {"tags": ["a", "b"]}, status=400, code="INVALID_REQUEST")
    alice_api.error("memories/list", {"layer": "deep"}, status=400, code="MEMORY_LAYER_INVALID")


def test_it_hides_forgotten_and_expired_memories(personas):
    api = personas.alice_api
    forgotten = api.add("forgotten")
    expired = api.add("expired", layer="working")
    live = api.add("live")
    api.ok("memories/forget", {"id": forgotten["id"]})
    with workspace_context(personal_workspace_id(personas.alice)):
        Memory.objects.filter(pk=expired["id"]).update(expires_at=timezone.now() - timedelta(hours=1))
    assert ids(listed(api)["memories"]) == [live["id"]]


def test_it_sees_shared_and_own_user_memories(alice_api):
    shared = alice_api.add("shared")
    u1 = alice_api.add("for u1", scope={"userId": "u1"})
    u2 = alice_api.add("for u2", scope={"userId": "u2"})
    assert ids(listed(alice_api, scope={"userId": "u1"})["memories"]) == [u1["id"], shared["id"]]
    assert ids(listed(alice_api, scope={"userId": "u2"})["memories"]) == [u2["id"], shared["id"]]
    assert ids(listed(alice_api, scope={"userId": "u3"})["memories"]) == [shared["id"]]
    assert ids(listed(alice_api)["memories"]) == [shared["id"]]


def test_it_sees_global_and_own_project_memories(alice_api):
    glob = alice_api.add("everywhere")
    api = alice_api.add("api only", scope={"projectId": "github.com/alice/api"})
    web = alice_api.add("web only", scope={"projectId": "github.com/alice/web"})
    assert ids(listed(alice_api, scope={"projectId": "github.com/alice/api"})["memories"]) == [
        api["id"],
        glob["id"],
    ]
    assert ids(listed(alice_api, scope={"projectId": "github.com/alice/web"})["memories"]) == [
        web["id"],
        glob["id"],
    ]
    assert ids(listed(alice_api)["memories"]) == [glob["id"]]


def test_it_combines_user_and_project_rules(alice_api):
    glob_shared = alice_api.add("global shared")
    alice_api.add("global u2", scope={"userId": "u2"})
    project_u1 = alice_api.add("api u1", scope={"userId": "u1", "projectId": "github.com/alice/api"})
    alice_api.add("web u1", scope={"userId": "u1", "projectId": "github.com/alice/web"})
    scope = {"userId": "u1", "projectId": "github.com/alice/api"}
    assert ids(listed(alice_api, scope=scope)["memories"]) == [project_u1["id"], glob_shared["id"]]


def test_it_never_lists_another_workspace(personas):
    personas.alice_api.add("alice's personal note")
    assert listed(personas.bob_api)["memories"] == []
    assert listed(personas.bob_api, scope=ACME_SCOPE)["memories"] == []
    assert listed(personas.charlie_api)["memories"] == []
    assert listed(personas.charlie_api, scope=ACME_SCOPE)["memories"] == []
    assert listed(personas.alice_api, scope=ACME_SCOPE)["memories"] == []


def test_it_keeps_org_memories_in_the_org(personas):
    project = personas.alice_api.add("acme uses argo", scope=ACME_SCOPE)
    shared = add_org_global(personas, "acme ships on tuesdays")
    assert ids(listed(personas.bob_api, scope=ACME_SCOPE)["memories"]) == [shared["id"], project["id"]]
    assert ids(listed(personas.alice_api, scope=ACME_SCOPE)["memories"]) == [shared["id"], project["id"]]
    assert listed(personas.alice_api)["memories"] == []
    assert listed(personas.alice_api, scope={"projectId": "github.com/alice/x"})["memories"] == []
    assert listed(personas.bob_api)["memories"] == []
    assert listed(personas.charlie_api, scope=ACME_SCOPE)["memories"] == []
