"""Idempotency-Key on memories/add: replays, reuse with another body, key format, per-user and
per-workspace keys."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from memories.models import IdempotencyRecord
from tenancy.rls import workspace_context
from tests.memories.helpers import ACME_SCOPE, ids, personal_workspace_id, stored_count

KEY = "8a1c7e5e-3f9b-4c55-9d2e-0f7d6b1a2c3d"


def add(api, body, key=KEY):
    return api.post("memories/add", body, headers={"Idempotency-Key": key})


def test_it_replays_the_first_answer(personas):
    api = personas.alice_api
    body = {"content": "We deploy on Fridays", "tags": ["ops"]}
    first = add(api, body)
    assert first.status_code == 201
    assert not first.has_header("Idempotent-Replayed")
    second = add(api, body)
    assert second.status_code == 200
    assert second["Idempotent-Replayed"] == "true"
    assert second.json()["ok"] is True
    assert second.json()["data"] == first.json()["data"]
    assert second.json()["meta"]["requestId"] != first.json()["meta"]["requestId"]
    assert add(api, body).json()["data"]["id"] == first.json()["data"]["id"]
    assert ids(api.ok("memories/list", {})["memories"]) == [first.json()["data"]["id"]]
    assert stored_count(personal_workspace_id(personas.alice)) == 1


def test_it_compares_the_validated_body(alice_api):
    first = add(alice_api, {"content": "We deploy on Fridays"})
    second = add(alice_api, {"content": "  We deploy on Fridays ", "type": "note", "tags": []})
    assert second.status_code == 200 and second["Idempotent-Replayed"] == "true"
    assert second.json()["data"]["id"] == first.json()["data"]["id"]


def test_it_refuses_a_reused_key_with_another_body(personas):
    api = personas.alice_api
    assert add(api, {"content": "first"}).status_code == 201
    for body in (
        {"content": "second"},
        {"content": "first", "type": "fact"},
        {"content": "first", "scope": {"userId": "u1"}},
    ):
        r = add(api, body)
        assert r.status_code == 422
        envelope = r.json()
        assert envelope["ok"] is False and envelope["data"] is None
        assert envelope["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
        assert envelope["error"]["type"] == "validation_error" and envelope["error"]["status"] == 422
        assert envelope["error"]["details"] == {"idempotencyKey": KEY}
    assert stored_count(personal_workspace_id(personas.alice)) == 1


def test_it_rejects_malformed_keys(personas):
    api = personas.alice_api
    for key in ("has space", "k" * 256, "", "tab\tkey", "clé"):
        r = add(api, {"content": "x"}, key=key)
        assert r.status_code == 400, key
        error = r.json()["error"]
        assert error["code"] == "IDEMPOTENCY_KEY_INVALID" and error["type"] == "validation_error"
    assert stored_count(personal_workspace_id(personas.alice)) == 0


def test_it_accepts_keys_up_to_255_visible_characters(alice_api):
    assert add(alice_api, {"content": "x"}, key="k" * 255).status_code == 201
    assert add(alice_api, {"content": "y"}, key="!~{}[]:/.=_-+*").status_code == 201


def test_it_keeps_keys_apart_per_user(personas):
    body = {"content": "same body, same key", "scope": ACME_SCOPE}
    alice = add(personas.alice_api, body)
    bob = add(personas.bob_api, body)
    assert alice.status_code == 201 and bob.status_code == 201
    assert alice.json()["data"]["id"] != bob.json()["data"]["id"]
    assert stored_count(personas.acme.id) == 2
    # A different user may even send another body under the same key.
    assert add(personas.charlie_api, {"content": "charlie's"}).status_code == 201


def test_it_keeps_keys_apart_per_workspace(personas):
    api = personas.alice_api
    assert add(api, {"content": "personal"}).status_code == 201
    assert add(api, {"content": "org", "scope": ACME_SCOPE}).status_code == 201
    replay = add(api, {"content": "org", "scope": ACME_SCOPE})
    assert replay.status_code == 200 and replay["Idempotent-Replayed"] == "true"
    assert stored_count(personas.acme.id) == 1
    assert stored_count(personal_workspace_id(personas.alice)) == 1


def test_it_frees_a_key_after_its_ttl(personas):
    api = personas.alice_api
    workspace_id = personal_workspace_id(personas.alice)
    first = add(api, {"content": "first"})
    with workspace_context(workspace_id):
        IdempotencyRecord.objects.filter(key=KEY).update(expires_at=timezone.now() - timedelta(hours=1))
    second = add(api, {"content": "second"})
    assert second.status_code == 201
    assert second.json()["data"]["id"] != first.json()["data"]["id"]
    replay = add(api, {"content": "second"})
    assert replay.status_code == 200 and replay.json()["data"]["id"] == second.json()["data"]["id"]


def test_it_does_not_burn_a_key_on_a_rejected_request(personas):
    api = personas.alice_api
    r = add(api, {"content": ""})
    assert r.status_code == 400 and r.json()["error"]["code"] == "MEMORY_CONTENT_REQUIRED"
    assert add(api, {"content": "now valid"}).status_code == 201


def test_it_writes_twice_without_a_key(personas):
    api = personas.alice_api
    first = api.add("same")
    second = api.add("same")
    assert first["id"] != second["id"]
    assert stored_count(personal_workspace_id(personas.alice)) == 2
