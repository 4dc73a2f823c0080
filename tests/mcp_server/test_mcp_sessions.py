"""The session and skill-file tools over stdio: the same answers, limits, codes and roles as sessions/* and
skills/files/* (a real `manage.py mcp` process)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from tenancy import services
from tests.mcp_server.test_mcp_server import failure, new_key, ok, stdio

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_it_records_a_session_and_promotes_it_over_mcp():
    alice_key, _ = new_key("mcp-s-alice")
    bob_key, _ = new_key("mcp-s-bob")
    alice_user = get_user_model().objects.get(username="mcp-s-alice")
    reader_key = services.api_key_create(user=alice_user, scope="read").raw_key

    async def scenario() -> dict[str, Any]:
        async with stdio(alice_key) as alice, stdio(bob_key) as bob, stdio(reader_key) as reader:
            started = await ok(alice, "start_session", {"title": "Rotate the keys"})
            session_id = started["sessionId"]
            for content, role in (
                ("Rotate the signing keys, please.", "user"),
                ("Generated a new signing key in the vault.", "assistant"),
                ("Switched the token service to the new key.", "assistant"),
            ):
                turn = await ok(
                    alice, "record_turn", {"session_id": session_id, "content": content, "role": role}
                )
            assert turn["event"]["turnIndex"] == 2
            transcript = await alice.call_tool("session_transcript", {"session_id": session_id})
            text = transcript.content[0].text
            assert text.index("Rotate the signing") < text.index("Generated") < text.index("Switched")
            promoted = await ok(
                alice,
                "promote_session",
                {
                    "session_id": session_id,
                    "path": "skills/keys.md",
                    "title": "Rotate keys",
                    "procedure_key": "k",
                },
            )
            assert (
                promoted["created"] is True
                and "Switched the token service" in promoted["skillFile"]["content"]
            )
            listed = await ok(alice, "list_skill_files", {})
            assert [f["path"] for f in listed["skillFiles"]] == ["skills/keys.md"]
            # Another workspace's key does not find the session; a read key may not write.
            missing = await failure(bob, "record_turn", {"session_id": session_id, "content": "x"})
            assert missing.startswith("SESSION_NOT_FOUND")
            refused = await failure(reader, "record_turn", {"session_id": session_id, "content": "x"})
            assert refused.startswith("FORBIDDEN_ROLE")
            assert (await failure(alice, "save_skill_file", {"path": "../x", "content": "x"})).startswith(
                "INVALID_REQUEST"
            )
            return await ok(alice, "end_session", {"session_id": session_id})

    ended = asyncio.run(scenario())
    assert ended["session"]["status"] == "closed" and ended["summary"]["method"] == "extractive"
