"""POST memories/bulk-forget: filter rules, dry runs, each filter, write scope and workspace isolation."""

from __future__ import annotations

from django.utils import timezone

from memories.models import Memory
from tenancy.rls import workspace_context
from tests.memories.helpers import (
    ACME_SCOPE,
    add_org_global,
    backdate,
    ids,
    personal_workspace_id,
    stored,
    stored_count,
)


def bulk(api, filters, **fields):
    return api.ok("memories/bulk-forget", {"filters": filters, **fields})


def listed_ids(api, **fields):
    return set(ids(api.ok("memories/list", {"limit": 100, **fields})["memories"]))


def test_it_works(alice_api):
    note = alice_api.add("a note")
    rule = alice_api.add("a rule", type="rule")
    r = alice_api.post("memories/bulk-forget", {"filters": {"types": ["note"]}})
    assert r.status_code == 200
    envelope = r.json()
    assert envelope["ok"] is True and envelope["meta"]["endpoint"] == "/api/sdk/v1/memories/bulk-forget"
    data = envelope["data"]
    assert data["count"] == 1 and data["ids"] == [note["id"]]
    assert data["hasMore"] is False and data["memories"] is None and data["message"]
    assert listed_ids(alice_api) == {rule["id"]}


def test_it_only_soft_deletes(personas):
    memory = personas.alice_api.add("x")
    bulk(personas.alice_api, {"all": True})
    assert stored(personal_workspace_id(personas.alice), memory["id"]).deleted_at is not None


def test_it_previews_a_dry_run_without_forgetting(alice_api):
    long = alice_api.add("L" * 79 + "é and then a lot more text that the preview cuts off", type="fact")
    short = alice_api.add("short note")
    alice_api.add("a rule", type="rule")
    data = bulk(alice_api, {"types": ["fact", "note"]}, dryRun=True)
    assert data["count"] == 2
    assert data["ids"] is None and data["hasMore"] is False and data["message"]
    assert data["memories"] == [
        {"id": short["id"], "type": "note", "contentPreview": "short note"},
        {"id": long["id"], "type": "fact", "contentPreview": "L" * 79 + "é"},
    ]
    assert all(len(preview["contentPreview"]) <= 80 for preview in data["memories"])
    assert len(listed_ids(alice_api)) == 3


def test_it_caps_dry_run_previews_at_1000(personas):
    workspace_id = personal_workspace_id(personas.alice)
    now = timezone.now()
    with workspace_context(workspace_id):
        Memory.objects.bulk_create(
            Memory(workspace_id=workspace_id, content=f"bulk {i}", created_at=now, updated_at=now)
            for i in range(1001)
        )
    data = bulk(personas.alice_api, {"pattern": "bulk *"}, dryRun=True)
    assert data["count"] == 1001
    assert len(data["memories"]) == 1000
    assert stored_count(workspace_id, deleted_at__isnull=True) == 1001


def test_it_needs_a_filter(alice_api):
    memory = alice_api.add("x", scope={"projectId": "github.com/alice/api"})
    for filters in (
        {},
        {"projectId": "github.com/alice/api"},
        {"types": []},
        {"tags": []},
        {"all": False},
        {"all": None, "pattern": None},
    ):
        error = alice_api.error(
            "memories/bulk-forget", {"filters": filters}, status=400, code="BULK_FORGET_NO_FILTERS"
        )
        assert error["type"] == "validation_error"
    error = alice_api.error("memories/bulk-forget", {}, status=400, code="INVALID_REQUEST")
    assert error["details"]["issues"][0]["field"] == "filters"
    assert listed_ids(alice_api, scope={"projectId": "github.com/alice/api"}) == {memory["id"]}


def test_it_wants_all_alone(alice_api):
    memory = alice_api.add("x")
    for other in (
        {"types": ["note"]},
        {"tags": ["a"]},
        {"olderThanDays": 1},
        {"pattern": "*"},
        {"projectId": "github.com/alice/api"},
    ):
        alice_api.error(
            "memories/bulk-forget",
            {"filters": {"all": True, **other}},
            status=400,
            code="BULK_FORGET_INVALID_FILTERS",
        )
    assert listed_ids(alice_api) == {memory["id"]}


def test_it_validates_filters(alice_api):
    cases = {
        "types": ["memo"],
        "tags": ["t" * 129],
        "olderThanDays": 0,
        "pattern": "p" * 501,
        "projectId": "p" * 241,
    }
    for field, value in cases.items():
        error = alice_api.error(
            "memories/bulk-forget", {"filters": {field: value}}, status=400, code="INVALID_REQUEST"
        )
        assert error["details"]["issues"][0]["field"].startswith(f"filters.{field}")
    error = alice_api.error(
        "memories/bulk-forget", {"filters": {"before": "2026-01-01"}}, status=400, code="INVALID_REQUEST"
    )
    assert error["details"]["issues"] == [
        {"field": "filters.before", "message": "unknown field; remove it", "type": "extra_forbidden"}
    ]
    error = alice_api.error(
        "memories/bulk-forget",
        {"filters": {"all": True}, "dry_run": True},
        status=400,
        code="INVALID_REQUEST",
    )
    assert error["details"]["issues"][0]["field"] == "dry_run"


def test_it_refuses_a_nul_character(alice_api):
    body = {"filters": {"pattern": "a\x00*"}}
    error = alice_api.error("memories/bulk-forget", body, status=400, code="INVALID_REQUEST")
    assert error["details"]["issues"][0]["field"] == "filters.pattern"


def test_it_forgets_everything_in_scope_with_all(alice_api):
    shared = [alice_api.add(f"m{i}")["id"] for i in range(3)]
    project = alice_api.add("project", scope={"projectId": "github.com/alice/api"})
    u1 = alice_api.add("u1", scope={"userId": "u1"})
    data = bulk(alice_api, {"all": True})
    assert data["count"] == 4 and set(data["ids"]) == {*shared, project["id"]}
    assert listed_ids(alice_api, scope={"userId": "u1", "projectId": "github.com/alice/api"}) == {u1["id"]}
    assert bulk(alice_api, {"all": True})["count"] == 0


def test_it_matches_glob_patterns(alice_api):
    starts = alice_api.add("deploy on friday")
    middle = alice_api.add("we deploy on monday")
    version = alice_api.add("v1.0 released")
    other_version = alice_api.add("v2.0 released")
    dotted = alice_api.add("v1x0 released")
    percent = alice_api.add("100% done")
    alice_api.add("1000 done")

    def preview(pattern):
        return {m["id"] for m in bulk(alice_api, {"pattern": pattern}, dryRun=True)["memories"]}

    assert preview("deploy*") == {starts["id"]}
    assert preview("*deploy*") == {starts["id"], middle["id"]}
    assert preview("*on ?onday") == {middle["id"]}
    assert preview("v?.0 released") == {version["id"], other_version["id"]}
    assert preview("v1.0*") == {version["id"]}
    assert preview("100%*") == {percent["id"]}
    assert preview("v1?0 released") == {version["id"], dotted["id"]}
    assert preview("deploy") == set()
    data = bulk(alice_api, {"pattern": "v?.0 *"})
    assert set(data["ids"]) == {version["id"], other_version["id"]}
    assert version["id"] not in listed_ids(alice_api)


def test_it_matches_patterns_across_lines(alice_api):
    memory = alice_api.add("first line\nsecond line")
    assert bulk(alice_api, {"pattern": "first*line"})["ids"] == [memory["id"]]


def test_it_filters_by_any_of_the_tags(alice_api):
    ops = alice_api.add("a", tags=["ops"])
    ci = alice_api.add("b", tags=["ci", "other"])
    kept = alice_api.add("c", tags=["opsec"])
    untagged = alice_api.add("d")
    data = bulk(alice_api, {"tags": ["ops", "ci"]})
    assert set(data["ids"]) == {ops["id"], ci["id"]}
    assert listed_ids(alice_api) == {kept["id"], untagged["id"]}


def test_it_filters_by_type(alice_api):
    rule = alice_api.add("r", type="rule")
    fact = alice_api.add("f", type="fact")
    note = alice_api.add("n")
    assert set(bulk(alice_api, {"types": ["rule", "fact"]})["ids"]) == {rule["id"], fact["id"]}
    assert listed_ids(alice_api) == {note["id"]}


def test_it_filters_by_age(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    old = api.add("old")
    older = api.add("older")
    fresh = api.add("fresh")
    backdate(workspace_id, old["id"], days=10)
    backdate(workspace_id, older["id"], days=40)
    assert ids(bulk(api, {"olderThanDays": 30}, dryRun=True)["memories"]) == [older["id"]]
    assert ids(bulk(api, {"olderThanDays": 5}, dryRun=True)["memories"]) == [old["id"], older["id"]]
    assert bulk(api, {"olderThanDays": 30})["ids"] == [older["id"]]
    assert listed_ids(api) == {old["id"], fresh["id"]}


def test_it_combines_filters(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    match = api.add("deploy old fact", type="fact", tags=["ops"])
    wrong_type = api.add("deploy old note", tags=["ops"])
    wrong_tag = api.add("deploy old fact 2", type="fact", tags=["dev"])
    too_new = api.add("deploy new fact", type="fact", tags=["ops"])
    for memory in (match, wrong_type, wrong_tag):
        backdate(workspace_id, memory["id"], days=3)
    data = bulk(api, {"types": ["fact"], "tags": ["ops"], "olderThanDays": 2, "pattern": "deploy*"})
    assert data["ids"] == [match["id"]]
    assert listed_ids(api) == {wrong_type["id"], wrong_tag["id"], too_new["id"]}


def test_it_narrows_to_a_project(alice_api):
    api_memory = alice_api.add("note", scope={"projectId": "github.com/alice/api"})
    web_memory = alice_api.add("note", scope={"projectId": "github.com/alice/web"})
    glob = alice_api.add("note")
    data = bulk(alice_api, {"types": ["note"], "projectId": "github.com/alice/api"})
    assert data["ids"] == [api_memory["id"]]
    assert listed_ids(alice_api, scope={"projectId": "github.com/alice/web"}) == {
        web_memory["id"],
        glob["id"],
    }


def test_it_forgets_only_the_given_users_memories(alice_api):
    shared = alice_api.add("note shared")
    u1 = alice_api.add("note u1", scope={"userId": "u1"})
    u2 = alice_api.add("note u2", scope={"userId": "u2"})
    assert bulk(alice_api, {"types": ["note"]}, scope={"userId": "u1"})["ids"] == [u1["id"]]
    assert listed_ids(alice_api, scope={"userId": "u2"}) == {shared["id"], u2["id"]}
    assert bulk(alice_api, {"types": ["note"]})["ids"] == [shared["id"]]
    assert listed_ids(alice_api, scope={"userId": "u2"}) == {u2["id"]}


def test_it_never_forgets_in_another_workspace(personas):
    alice_memory = personas.alice_api.add("alice's note")
    org_memory = add_org_global(personas, "acme's note")
    assert bulk(personas.charlie_api, {"all": True})["count"] == 0
    assert bulk(personas.charlie_api, {"all": True}, scope=ACME_SCOPE)["count"] == 0
    assert bulk(personas.bob_api, {"all": True})["count"] == 0
    data = bulk(personas.alice_api, {"all": True}, dryRun=True)
    assert ids(data["memories"]) == [alice_memory["id"]]
    assert listed_ids(personas.alice_api, scope=ACME_SCOPE) == {org_memory["id"]}
    assert bulk(personas.alice_api, {"all": True})["ids"] == [alice_memory["id"]]
    assert listed_ids(personas.bob_api, scope=ACME_SCOPE) == {org_memory["id"]}
    # A member may not forget the org's shared memories (admin), and nothing changes when refused.
    refused = personas.bob_api.post("memories/bulk-forget", {"filters": {"all": True}, "scope": ACME_SCOPE})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN_ROLE"
    assert listed_ids(personas.bob_api, scope=ACME_SCOPE) == {org_memory["id"]}
    assert bulk(personas.alice_api, {"all": True}, scope=ACME_SCOPE)["ids"] == [org_memory["id"]]
