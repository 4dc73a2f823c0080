"""skills/files/*: upsert, list, delete, promote a session into a procedure (outline or model), context/get's
includeSkillFiles; the role each route needs and the tenancy of skill files."""

from __future__ import annotations

import json

from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tenancy import services
from tests.conftest import API, SdkClient
from tests.conversations.test_sessions import checkpoint, start
from tests.memories.helpers import ACME_SCOPE

DEPLOY = "# Deploy\n\n1. Run the migrations.\n2. Roll the web pods one by one.\n"


def upsert(api: SdkClient, path: str, content: str, *, status: int = 201, **body: object) -> dict:
    return api.ok("skills/files/upsert", {"path": path, "content": content, **body}, status=status)


def test_it_writes_lists_replaces_and_deletes_a_skill_file(alice_api):
    created = upsert(alice_api, "skills/deploy/SKILL.md", DEPLOY)
    assert created["created"] is True and created["skillFile"]["content"] == DEPLOY
    listed = alice_api.ok("skills/files/list", {})
    assert listed["count"] == 1 and listed["skillFiles"][0]["path"] == "skills/deploy/SKILL.md"
    replaced = upsert(alice_api, "skills/deploy/SKILL.md", DEPLOY + "3. Watch the error rate.\n", status=200)
    assert replaced["created"] is False and replaced["skillFile"]["id"] == created["skillFile"]["id"]
    assert alice_api.ok("skills/files/delete", {"path": "skills/deploy/SKILL.md"})["deleted"] is True
    assert alice_api.ok("skills/files/list", {})["count"] == 0
    alice_api.error(
        "skills/files/delete", {"path": "skills/deploy/SKILL.md"}, status=404, code="SKILL_FILE_NOT_FOUND"
    )


def test_it_refuses_paths_that_could_leave_a_directory(alice_api):
    for path in ("/etc/passwd", "skills/../x.md", "skills//x.md", "a\\b.md", "skills/\x01.md", "x" * 401):
        alice_api.error(
            "skills/files/upsert", {"path": path, "content": "x"}, status=400, code="INVALID_REQUEST"
        )
    alice_api.error(
        "skills/files/upsert", {"path": "a.md", "content": "x" * 120_001}, status=400, code="INVALID_REQUEST"
    )


def test_it_keeps_one_file_per_path_and_owner(alice_api):
    upsert(alice_api, "skills/a.md", "shared")
    upsert(alice_api, "skills/a.md", "u1's own", scope={"userId": "u1"})
    # u1 reads the shared file and their own; the shared one is not theirs to delete.
    assert alice_api.ok("skills/files/list", {"scope": {"userId": "u1"}})["count"] == 2
    assert alice_api.ok("skills/files/list", {})["count"] == 1
    alice_api.ok("skills/files/delete", {"path": "skills/a.md", "scope": {"userId": "u1"}})
    assert [
        f["content"] for f in alice_api.ok("skills/files/list", {"scope": {"userId": "u1"}})["skillFiles"]
    ] == ["shared"]


def test_it_returns_the_matching_skill_files_from_context_get(alice_api):
    upsert(alice_api, "skills/deploy/SKILL.md", DEPLOY)
    upsert(alice_api, "skills/oncall/SKILL.md", "# On call\n\nPage the secondary after 15 minutes.\n")
    data = alice_api.ok("context/get", {"query": "how do we deploy the web pods?", "strategy": "lexical"})
    assert [f["path"] for f in data["skillFiles"]] == ["skills/deploy/SKILL.md"]
    assert data["skillFiles"][0]["usageCount"] == 0  # the answer shows the file as it was read
    listed = {f["path"]: f for f in alice_api.ok("skills/files/list", {})["skillFiles"]}
    assert (
        listed["skills/deploy/SKILL.md"]["usageCount"] == 1
        and listed["skills/oncall/SKILL.md"]["usageCount"] == 0
    )
    off = alice_api.ok("context/get", {"query": "deploy", "includeSkillFiles": False, "strategy": "lexical"})
    assert off["skillFiles"] == []
    everything = alice_api.ok("context/get", {})
    assert {f["path"] for f in everything["skillFiles"]} == set(listed)


def test_it_sends_no_skill_file_statement_to_a_workspace_without_skill_files(alice_api):
    body = {"query": "how do we deploy the web pods?", "strategy": "lexical"}
    with CaptureQueriesContext(connections["app"]) as sent:
        assert alice_api.ok("context/get", body)["skillFiles"] == []
    assert not [q for q in sent.captured_queries if q["sql"].lstrip().startswith('SELECT "skill_files"')]
    upsert(alice_api, "skills/deploy/SKILL.md", DEPLOY)
    assert [f["path"] for f in alice_api.ok("context/get", body)["skillFiles"]] == ["skills/deploy/SKILL.md"]
    # Without the rules' statement (which tells whether any skill file exists), their own statement decides.
    no_rules = alice_api.ok("context/get", {**body, "includeRules": False})
    assert [f["path"] for f in no_rules["skillFiles"]] == ["skills/deploy/SKILL.md"]


def _worked_session(api: SdkClient, **scope: object) -> str:
    session_id = start(api, title="Release the backend", **scope)
    for content, role in (
        ("Can you release the backend?", "user"),
        ("Ran the database migrations on staging first.", "assistant"),
        ("Tagged the release as v2.3.0 and pushed the tag.", "assistant"),
        ("Is it live?", "user"),
        ("Rolled the web pods one by one and watched the error rate.", "assistant"),
    ):
        checkpoint(api, session_id, content, role=role, **scope)
    return session_id


def test_it_promotes_a_session_into_a_procedure_with_a_deterministic_outline(alice_api):
    session_id = _worked_session(alice_api)
    body = {
        "sessionId": session_id,
        "path": "skills/release/SKILL.md",
        "title": "Release the backend",
        "procedureKey": "release-backend",
        "maxSteps": 3,
    }
    promoted = alice_api.ok("skills/files/promote", body, status=201)
    assert promoted["created"] is True and promoted["method"] == "outline"
    content = promoted["skillFile"]["content"]
    assert content.startswith("---\nname: release-backend\n")
    steps = [line for line in content.splitlines() if line[:2] in ("1.", "2.", "3.")]
    assert steps == [
        "1. Ran the database migrations on staging first.",
        "2. Tagged the release as v2.3.0 and pushed the tag.",
        "3. Rolled the web pods one by one and watched the error rate.",
    ]
    assert promoted["skillFile"]["procedureKey"] == "release-backend"
    assert promoted["source"]["sessionId"] == session_id and promoted["source"]["snapshotSlug"].startswith(
        "release-the-backend-"
    )
    # Promoting again replaces the file (200), and a named snapshot of another session is not found.
    again = alice_api.ok("skills/files/promote", body)
    assert again["created"] is False
    other = start(alice_api)
    snap = alice_api.client.get(
        f"{API}/sessions/{other}/snapshot", HTTP_AUTHORIZATION=f"Bearer {alice_api.key}"
    )
    alice_api.error(
        "skills/files/promote",
        {**body, "snapshotId": snap.json()["data"]["snapshot"]["id"]},
        status=404,
        code="SNAPSHOT_NOT_FOUND",
    )
    alice_api.error("skills/files/promote", {**body, "maxSteps": 2}, status=400, code="INVALID_REQUEST")


def test_it_promotes_with_the_model_when_one_is_configured(alice_api, summary_model):
    provider, answers = summary_model
    answers["steps"] = {
        "steps": ["Run the migrations on staging.", "Tag and push the release.", "Roll the pods."]
    }
    session_id = _worked_session(alice_api)
    promoted = alice_api.ok(
        "skills/files/promote",
        {"sessionId": session_id, "path": "skills/r.md", "title": "Release", "procedureKey": "release"},
        status=201,
    )
    assert promoted["method"] == "llm"
    assert (
        "1. Run the migrations on staging.\n2. Tag and push the release.\n3. Roll the pods."
        in (promoted["skillFile"]["content"])
    )
    # The model failing: the outline instead.
    provider.before_answer = lambda path, body: (500, {"error": {"message": "down"}})
    fallback = alice_api.ok(
        "skills/files/promote",
        {"sessionId": session_id, "path": "skills/r.md", "title": "Release", "procedureKey": "release"},
    )
    assert (
        fallback["method"] == "outline" and "Ran the database migrations" in fallback["skillFile"]["content"]
    )


def test_it_turns_promotion_off_per_workspace(alice_api):
    session_id = _worked_session(alice_api)
    alice_api.client.patch(
        f"{API}/memories/settings",
        json.dumps({"proceduralEnabled": False}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alice_api.key}",
    )
    alice_api.error(
        "skills/files/promote",
        {"sessionId": session_id, "path": "skills/r.md", "title": "R", "procedureKey": "r"},
        status=403,
        code="MEMORY_PROCEDURAL_DISABLED",
    )


def test_it_keeps_skill_files_in_their_workspace(personas):
    alice, charlie = personas.alice_api, personas.charlie_api
    upsert(alice, "skills/deploy/SKILL.md", DEPLOY, scope=ACME_SCOPE)
    assert charlie.ok("skills/files/list", {"scope": ACME_SCOPE})["count"] == 0
    charlie.error(
        "skills/files/delete",
        {"path": "skills/deploy/SKILL.md", "scope": ACME_SCOPE},
        status=404,
        code="SKILL_FILE_NOT_FOUND",
    )
    assert charlie.ok("context/get", {"query": "deploy", "scope": ACME_SCOPE})["skillFiles"] == []
    assert alice.ok("skills/files/list", {"scope": ACME_SCOPE})["count"] == 1


def test_it_refuses_a_read_key_every_skill_file_write(personas):
    reader = SdkClient(Client(), services.api_key_create(user=personas.bob, scope="read").raw_key)
    session_id = _worked_session(personas.alice_api, scope=ACME_SCOPE)
    upsert(personas.alice_api, "skills/deploy/SKILL.md", DEPLOY, scope=ACME_SCOPE)
    for path, body in (
        ("skills/files/upsert", {"path": "skills/x.md", "content": "x"}),
        ("skills/files/delete", {"path": "skills/deploy/SKILL.md"}),
        (
            "skills/files/promote",
            {"sessionId": session_id, "path": "s.md", "title": "t", "procedureKey": "k"},
        ),
    ):
        error = reader.error(path, {**body, "scope": ACME_SCOPE}, status=403, code="FORBIDDEN_ROLE")
        assert error["details"]["requiredRole"] == "write"
    assert reader.ok("skills/files/list", {"scope": ACME_SCOPE})["count"] == 1
