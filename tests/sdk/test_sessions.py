"""cairn_sdk against a live server for sessions and skill files: start, checkpoint, a batch of turns, end with
its summary, the snapshot, and skill files from upsert to promote."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from cairn_sdk import AsyncCairn
from cairn_sdk.errors import NotFoundError

from tests.sdk.conftest import LIVE

pytestmark = LIVE


def test_it_records_a_session_and_promotes_it(cairn):
    started = cairn.sessions.start(title="Rotate the TLS certificate", client="sdk-test")
    session_id = started.session_id
    first = cairn.sessions.checkpoint(session_id, "Please rotate the TLS certificate.", speaker="Dana")
    assert first.event.turn_index == 0 and first.event.memory.conversation.speaker == "Dana"
    batch = cairn.sessions.add_turns(
        session_id,
        [
            {"content": "Issued a new certificate from the internal CA.", "role": "assistant"},
            {
                "content": "Reloaded nginx on both edge nodes.",
                "role": "assistant",
                "said_at": datetime(2024, 3, 1, 9, 30, tzinfo=UTC),
            },
        ],
    )
    assert batch.created == 2 and [e.turn_index for e in batch.events] == [1, 2]
    assert batch.events[1].said_at == datetime(2024, 3, 1, 9, 30, tzinfo=UTC)
    snapshot = cairn.sessions.snapshot(session_id).snapshot
    assert snapshot.message_count == 3 and snapshot.transcript_md.index(
        "rotate"
    ) < snapshot.transcript_md.index("Reloaded nginx")
    promoted = cairn.skills.promote(
        session_id, path="skills/tls/SKILL.md", title="Rotate TLS", procedure_key="rotate-tls", max_steps=3
    )
    assert promoted.created is True and promoted.source.snapshot_id == snapshot.id
    assert "Reloaded nginx on both edge nodes." in promoted.skill_file.content
    ended = cairn.sessions.end(session_id)
    assert ended.session.status == "closed" and ended.summary is not None
    assert ended.summary.method in {"llm", "extractive"}
    assert [f.path for f in cairn.skills.list().skill_files] == ["skills/tls/SKILL.md"]
    found = cairn.context.get("how do we rotate the TLS certificate?", strategy="lexical")
    assert [f.path for f in found.skill_files] == ["skills/tls/SKILL.md"]
    assert cairn.skills.delete("skills/tls/SKILL.md").deleted is True
    try:
        cairn.sessions.snapshot("00000000-0000-0000-0000-000000000000")
    except NotFoundError as exc:
        assert exc.code == "SESSION_NOT_FOUND"
    else:
        raise AssertionError("an unknown session must be 404")


def test_it_has_the_same_methods_async(base_url, alice):
    async def run() -> None:
        async with AsyncCairn(alice.key, base_url=base_url, timeout=30) as cairn:
            started = await cairn.sessions.start(title="async")
            await cairn.sessions.checkpoint(started.session_id, "One turn.")
            snapshot = await cairn.sessions.snapshot(started.session_id)
            assert snapshot.snapshot.message_count == 1
            written = await cairn.skills.upsert("skills/a.md", "# A\n")
            assert written.created is True and written.skill_file.content == "# A\n"
            assert (await cairn.skills.list()).count == 1
            assert (await cairn.sessions.end(started.session_id)).summary is not None

    asyncio.run(run())
