"""sessions/*: start, checkpoint, the batch route, end with its summary, the snapshot; the per-workspace
switch, the role each route needs and the tenancy of sessions and turns."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client

from memories.models import Memory, MemorySession
from tenancy import services
from tenancy.rls import workspace_context
from tests.conftest import API, SdkClient
from tests.memories.helpers import ACME_SCOPE, run_jobs


def start(api: SdkClient, **fields: Any) -> str:
    body = {"title": "Release planning", "client": "pytest", **fields}
    return api.ok("sessions/start", body, status=201)["sessionId"]


def checkpoint(api: SdkClient, session_id: str, content: str, **fields: Any) -> dict[str, Any]:
    return api.ok("sessions/checkpoint", {"sessionId": session_id, "content": content, **fields}, status=201)


def snapshot(api: SdkClient, session_id: str, query: str = "") -> Any:
    return api.client.get(
        f"{API}/sessions/{session_id}/snapshot{query}", HTTP_AUTHORIZATION=f"Bearer {api.key}"
    )


def test_it_starts_a_session_and_stores_each_checkpoint_as_a_turn(alice_api, alice_ws):
    started = alice_api.ok(
        "sessions/start", {"title": "Release planning", "client": "pytest", "metadata": {"a": 1}}, status=201
    )
    assert started["session"]["status"] == "active" and started["session"]["turnCount"] == 0
    assert started["session"]["title"] == "Release planning" and started["session"]["metadata"] == {"a": 1}
    session_id = started["sessionId"]
    first = checkpoint(alice_api, session_id, "When do we ship the billing release?", speaker="Dana")
    second = checkpoint(
        alice_api,
        session_id,
        "Thursday, after the migration dry run.",
        role="assistant",
        speaker="Lee",
        saidAt="2023-05-08T13:56:00Z",
        tokenCount=12,
    )
    assert first["event"]["turnIndex"] == 0 and second["event"]["turnIndex"] == 1
    turn = second["event"]["memory"]
    assert turn["conversation"] == {
        "sessionId": session_id,
        "kind": "message",
        "turnIndex": 1,
        "role": "assistant",
        "speaker": "Lee",
        "saidAt": "2023-05-08T13:56:00Z",
    }
    assert second["eventId"] == turn["id"]
    # A turn is a memory like any other: search finds it, with its place in the conversation.
    found = alice_api.ok("memories/search", {"query": "migration dry run", "strategy": "lexical"})
    assert [m["id"] for m in found["memories"]] == [turn["id"]]
    assert found["memories"][0]["conversation"]["speaker"] == "Lee"
    with workspace_context(alice_ws):
        session = MemorySession.objects.get(id=session_id)
        assert (session.turn_count, session.token_count, session.next_turn_index) == (2, 12, 2)


def test_it_answers_a_retried_turn_and_refuses_another_text_at_a_taken_index(alice_api):
    session_id = start(alice_api)
    stored = checkpoint(alice_api, session_id, "We pick Postgres.", turnIndex=0)
    again = alice_api.ok(
        "sessions/checkpoint", {"sessionId": session_id, "content": "We pick Postgres.", "turnIndex": 0}
    )
    assert again["event"]["replayed"] is True and again["eventId"] == stored["eventId"]
    error = alice_api.error(
        "sessions/checkpoint",
        {"sessionId": session_id, "content": "We pick MySQL.", "turnIndex": 0},
        status=409,
        code="TURN_INDEX_TAKEN",
    )
    assert error["details"]["memoryId"] == stored["eventId"]
    # Without an index a turn goes after the highest one stored, even past a gap.
    checkpoint(alice_api, session_id, "Skipping ahead.", turnIndex=5)
    assert checkpoint(alice_api, session_id, "Next one.")["event"]["turnIndex"] == 6


def test_it_uploads_a_conversation_in_one_batch_and_stores_nothing_on_a_conflict(alice_api, alice_ws):
    session_id = start(alice_api)
    turns = [
        {"content": "Did the nightly backup run?", "speaker": "Dana", "saidAt": "2024-01-02T09:00:00Z"},
        {"content": "Yes, it finished at 2 am.", "speaker": "Lee", "role": "assistant"},
        {"content": "ok", "speaker": "Dana", "isMeaningful": False},
    ]
    # Numbered, so that the same upload sent again is recognised (unnumbered turns are appended).
    turns = [{**turn, "turnIndex": index} for index, turn in enumerate(turns)]
    uploaded = alice_api.ok("sessions/turns", {"sessionId": session_id, "turns": turns}, status=201)
    assert uploaded["count"] == 3 and uploaded["created"] == 3
    assert [e["turnIndex"] for e in uploaded["events"]] == [0, 1, 2]
    assert uploaded["events"][2]["memory"]["importance"] == 0.0
    # The same upload again (a client that lost the answer) stores nothing new.
    again = alice_api.ok("sessions/turns", {"sessionId": session_id, "turns": turns})
    assert again["created"] == 0 and [e["replayed"] for e in again["events"]] == [True, True, True]
    conflicting = [{"content": "new", "turnIndex": 3}, {"content": "changed", "turnIndex": 1}]
    alice_api.error(
        "sessions/turns", {"sessionId": session_id, "turns": conflicting}, status=409, code="TURN_INDEX_TAKEN"
    )
    with workspace_context(alice_ws):
        assert Memory.objects.filter(session_id=session_id).count() == 3
    alice_api.error(
        "sessions/turns",
        {
            "sessionId": session_id,
            "turns": [{"content": "a", "turnIndex": 7}, {"content": "b", "turnIndex": 7}],
        },
        status=400,
        code="INVALID_REQUEST",
    )
    too_many = [{"content": f"turn {i}"} for i in range(501)]
    alice_api.error(
        "sessions/turns", {"sessionId": session_id, "turns": too_many}, status=400, code="INVALID_REQUEST"
    )


def test_it_validates_turns_with_the_error_envelope(alice_api):
    session_id = start(alice_api)
    alice_api.error(
        "sessions/checkpoint",
        {"sessionId": session_id, "content": " "},
        status=400,
        code="MEMORY_CONTENT_REQUIRED",
    )
    for body in (
        {"sessionId": session_id, "content": "x" * 16_001},
        {"sessionId": session_id, "content": "x", "role": "robot"},
        {"sessionId": session_id, "content": "x", "saidAt": "2024-01-02T09:00:00"},
        {"sessionId": session_id, "content": "x", "turnIndex": -1},
        {"sessionId": session_id, "content": "x", "unknown": 1},
    ):
        alice_api.error("sessions/checkpoint", body, status=400, code="INVALID_REQUEST")
    alice_api.error(
        "sessions/checkpoint",
        {"sessionId": "not-a-session", "content": "x"},
        status=404,
        code="SESSION_NOT_FOUND",
    )
    alice_api.error("sessions/start", {"title": "t" * 241}, status=400, code="INVALID_REQUEST")


def test_it_ends_a_session_with_an_extractive_summary_and_a_transcript(alice_api, alice_ws):
    session_id = start(alice_api)
    for content, speaker in (
        ("Should the billing service move to the new queue?", "Dana"),
        ("Yes: the billing service drops messages on the old queue under load.", "Lee"),
        ("Then we move billing to the new queue on Thursday.", "Dana"),
    ):
        checkpoint(alice_api, session_id, content, speaker=speaker)
    ended = alice_api.ok("sessions/end", {"sessionId": session_id})
    assert ended["session"]["status"] == "closed" and ended["session"]["endedAt"]
    summary = ended["summary"]
    assert summary["method"] == "extractive" and summary["fallbackReason"] is None
    assert "billing" in summary["content"] and summary["content"].startswith("Summary of session")
    assert ended["session"]["summaryMemoryId"] == summary["memoryId"]
    with workspace_context(alice_ws):
        stored = Memory.objects.get(id=summary["memoryId"])
        assert (stored.session_id, stored.turn_kind, stored.turn_index) == (
            stored.session_id,
            "summary",
            None,
        )
        assert str(stored.session_id) == session_id
    transcript = ended["snapshot"]["transcriptMd"]
    assert ended["snapshot"]["sourceTrigger"] == "session_end" and ended["snapshot"]["messageCount"] == 3
    positions = [
        transcript.index(text) for text in ("Should the billing", "Yes: the billing", "Then we move")
    ]
    assert positions == sorted(positions) and "## Summary" in transcript
    alice_api.error("sessions/end", {"sessionId": session_id}, status=409, code="SESSION_ENDED")
    alice_api.error(
        "sessions/checkpoint", {"sessionId": session_id, "content": "late"}, status=409, code="SESSION_ENDED"
    )


def test_it_ends_an_empty_session_without_a_summary(alice_api):
    session_id = start(alice_api)
    ended = alice_api.ok("sessions/end", {"sessionId": session_id, "status": "compacted"})
    assert ended["summary"] is None and ended["session"]["status"] == "compacted"
    assert ended["snapshot"]["messageCount"] == 0


def test_it_summarises_with_the_model_when_one_is_configured(alice_api, summary_model):
    provider, _ = summary_model
    session_id = start(alice_api)
    checkpoint(alice_api, session_id, "Move billing to the new queue?", speaker="Dana")
    checkpoint(alice_api, session_id, "Agreed, Thursday.", speaker="Lee")
    ended = alice_api.ok("sessions/end", {"sessionId": session_id})
    assert ended["summary"]["method"] == "llm"
    assert ended["summary"]["content"] == "Dana and Lee agreed to move billing to the new queue."
    sent = [r for r in provider.requests if r["path"].endswith("/chat/completions")]
    prompt = sent[-1]["body"]["messages"][1]["content"]
    assert "[0] Dana: Move billing to the new queue?" in prompt and "<external-data>" in prompt


def test_it_falls_back_to_an_extractive_summary_when_the_model_fails(alice_api, summary_model):
    provider, _ = summary_model
    provider.before_answer = lambda path, body: (500, {"error": {"message": "down"}})
    session_id = start(alice_api)
    checkpoint(alice_api, session_id, "The billing queue drops messages under load.", speaker="Lee")
    ended = alice_api.ok("sessions/end", {"sessionId": session_id})
    assert ended["summary"]["method"] == "extractive"
    assert ended["summary"]["fallbackReason"] == "LLM_UNAVAILABLE"
    assert "billing queue" in ended["summary"]["content"]


def test_it_snapshots_the_transcript_in_order_and_reuses_an_unchanged_one(alice_api):
    session_id = start(alice_api)
    for index in range(3):
        checkpoint(alice_api, session_id, f"Step {index}: run the migration part {index}.", role="assistant")
    first = snapshot(alice_api, session_id)
    assert first.status_code == 200, first.content
    taken = first.json()["data"]["snapshot"]
    assert taken["messageCount"] == 3 and taken["sourceTrigger"] == "snapshot_request"
    text = taken["transcriptMd"]
    assert text.index("Step 0") < text.index("Step 1") < text.index("Step 2")
    assert text.startswith("# Release planning")
    assert snapshot(alice_api, session_id).json()["data"]["snapshot"]["id"] == taken["id"]
    checkpoint(alice_api, session_id, "Step 3: done.")
    assert snapshot(alice_api, session_id).json()["data"]["snapshot"]["messageCount"] == 4
    missing = snapshot(alice_api, "00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "SESSION_NOT_FOUND"


def test_it_keeps_sessions_within_their_user_and_project(alice_api):
    mine = start(alice_api, scope={"userId": "u1"})
    alice_api.error(
        "sessions/checkpoint",
        {"sessionId": mine, "content": "x", "scope": {"userId": "u2"}},
        status=404,
        code="SESSION_NOT_FOUND",
    )
    turn = alice_api.ok(
        "sessions/checkpoint",
        {"sessionId": mine, "content": "u1 only", "scope": {"userId": "u1"}},
        status=201,
    )
    assert snapshot(alice_api, mine, "?userId=u2").status_code == 404
    assert snapshot(alice_api, mine, "?userId=u1").status_code == 200
    # The turn is u1's memory: another user's search does not see it.
    found = alice_api.ok(
        "memories/search", {"query": "u1 only", "strategy": "lexical", "scope": {"userId": "u2"}}
    )
    assert turn["eventId"] not in [m["id"] for m in found["memories"]]


def test_it_answers_404_across_workspaces(personas):
    alice, charlie = personas.alice_api, personas.charlie_api
    session_id = start(alice, scope=ACME_SCOPE)
    checkpoint(alice, session_id, "acme only", scope=ACME_SCOPE)
    # charlie naming acme's project lands in his own workspace, where the session does not exist.
    for path, body in (
        ("sessions/checkpoint", {"sessionId": session_id, "content": "x", "scope": ACME_SCOPE}),
        ("sessions/turns", {"sessionId": session_id, "turns": [{"content": "x"}], "scope": ACME_SCOPE}),
        ("sessions/end", {"sessionId": session_id, "scope": ACME_SCOPE}),
    ):
        charlie.error(path, body, status=404, code="SESSION_NOT_FOUND")
    assert snapshot(charlie, session_id, f"?projectId={ACME_SCOPE['projectId']}").status_code == 404
    charlie.error(
        "skills/files/promote",
        {
            "sessionId": session_id,
            "path": "skills/x/SKILL.md",
            "title": "x",
            "procedureKey": "x",
            "scope": ACME_SCOPE,
        },
        status=404,
        code="SESSION_NOT_FOUND",
    )


def test_it_refuses_a_read_key_every_session_write(personas):
    reader = SdkClient(Client(), services.api_key_create(user=personas.bob, scope="read").raw_key)
    session_id = start(personas.alice_api, scope=ACME_SCOPE)
    for path, body in (
        ("sessions/start", {"title": "x"}),
        ("sessions/checkpoint", {"sessionId": session_id, "content": "x"}),
        ("sessions/turns", {"sessionId": session_id, "turns": [{"content": "x"}]}),
        ("sessions/end", {"sessionId": session_id}),
    ):
        error = reader.error(path, {**body, "scope": ACME_SCOPE}, status=403, code="FORBIDDEN_ROLE")
        assert error["details"]["requiredRole"] == "write"
    # Reading the transcript is a read.
    assert snapshot(reader, session_id, f"?projectId={ACME_SCOPE['projectId']}").status_code == 200


def test_it_turns_sessions_off_per_workspace(alice_api, personas):
    session_id = start(alice_api)
    settings = alice_api.client.patch(
        f"{API}/memories/settings",
        json.dumps({"sessionsEnabled": False}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alice_api.key}",
    )
    assert settings.status_code == 200 and settings.json()["data"]["sessionsEnabled"] is False
    alice_api.error("sessions/start", {}, status=403, code="MEMORY_SESSION_DISABLED")
    alice_api.error(
        "sessions/checkpoint",
        {"sessionId": session_id, "content": "x"},
        status=403,
        code="MEMORY_SESSION_DISABLED",
    )
    assert snapshot(alice_api, session_id).status_code == 403
    # Another workspace keeps its own switch.
    assert personas.charlie_api.post("sessions/start", {}).status_code == 201


def test_it_finds_the_turn_that_answers_a_question_through_context_get(alice_api, alice_ws, local_embedder):
    session_id = start(alice_api)
    for content in ("We should plan the office party.", "Sure, next Friday works.", "I'll book the room."):
        alice_api.add(content)
    question = checkpoint(alice_api, session_id, "Where do the nightly backups go now?", speaker="Dana")
    answer = checkpoint(alice_api, session_id, "To the cold storage bucket in Frankfurt.", speaker="Lee")
    checkpoint(alice_api, session_id, "Thanks!", speaker="Dana")
    run_jobs(alice_ws)
    data = alice_api.ok("context/get", {"query": "Where do the nightly backups go?", "strategy": "hybrid"})
    found = [m["id"] for m in data["memories"]]
    # The reply shares no word with the question asked; the turn before it does, and lifts it.
    assert answer["eventId"] in found
    assert found.index(answer["eventId"]) < 3 and question["eventId"] in found
