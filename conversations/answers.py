"""The answers of sessions/* and skills/files/*, built once for every way in (the SDK routes and the MCP
tools): each takes the validated request body and returns (HTTP status, data). Inside the workspace's
context."""

from __future__ import annotations

from typing import Any

from conversations import selectors, services
from conversations.schemas import (
    CheckpointIn,
    SessionEndIn,
    SessionStartIn,
    SkillDeleteIn,
    SkillListIn,
    SkillPromoteIn,
    SkillUpsertIn,
    TurnIn,
    TurnsIn,
)
from memories import selectors as memory_selectors
from memories.selectors import MemoryScope


def _turn_input(turn: TurnIn) -> services.TurnInput:
    return services.TurnInput(
        content=turn.content,
        role=turn.role,
        kind=turn.kind,
        speaker=turn.speaker,
        said_at=turn.saidAt,
        turn_index=turn.turnIndex,
        token_count=turn.tokenCount,
        is_meaningful=turn.isMeaningful,
        metadata=turn.metadata,
    )


def session_start_answer(
    *, workspace_id: int, scope: MemoryScope, body: SessionStartIn
) -> tuple[int, dict[str, Any]]:
    services.sessions_enabled_check(workspace_id=workspace_id)
    session = services.session_start(
        workspace_id=workspace_id, scope=scope, title=body.title, client=body.client, metadata=body.metadata
    )
    return 201, {
        "sessionId": str(session.id),
        "message": "Session started.",
        "session": selectors.session_payload(session),
    }


def session_checkpoint_answer(
    *, workspace_id: int, scope: MemoryScope, body: CheckpointIn
) -> tuple[int, dict[str, Any]]:
    services.sessions_enabled_check(workspace_id=workspace_id)
    [result] = services.session_turns_add(
        workspace_id=workspace_id, scope=scope, session_id=body.sessionId, turns=[_turn_input(body)]
    )
    return (200 if result.replayed else 201), {
        "sessionId": str(result.memory.session_id),
        "eventId": str(result.memory.id),
        "message": "Turn already stored." if result.replayed else "Turn stored.",
        "event": result.payload(),
    }


def session_turns_answer(
    *, workspace_id: int, scope: MemoryScope, body: TurnsIn
) -> tuple[int, dict[str, Any]]:
    services.sessions_enabled_check(workspace_id=workspace_id)
    results = services.session_turns_add(
        workspace_id=workspace_id,
        scope=scope,
        session_id=body.sessionId,
        turns=[_turn_input(turn) for turn in body.turns],
    )
    created = sum(1 for result in results if not result.replayed)
    return (201 if created else 200), {
        "sessionId": str(results[0].memory.session_id),
        "count": len(results),
        "created": created,
        "message": f"{created} turns stored, {len(results) - created} already there.",
        "events": [result.payload() for result in results],
    }


def session_end_answer(
    *, workspace_id: int, scope: MemoryScope, body: SessionEndIn
) -> tuple[int, dict[str, Any]]:
    services.sessions_enabled_check(workspace_id=workspace_id)
    ended = services.session_end(
        workspace_id=workspace_id, scope=scope, session_id=body.sessionId, status=body.status
    )
    summary = None
    if ended.summary is not None:
        summary = {
            "memoryId": str(ended.summary.id),
            "content": ended.summary.content,
            "method": ended.method,
            "fallbackReason": ended.fallback_reason,
        }
    return 200, {
        "sessionId": str(ended.session.id),
        "message": f"Session {ended.session.status}.",
        "session": selectors.session_payload(ended.session),
        "summary": summary,
        "snapshot": selectors.snapshot_payload(ended.snapshot),
    }


def session_snapshot_answer(
    *, workspace_id: int, scope: MemoryScope, session_id: str
) -> tuple[int, dict[str, Any]]:
    services.sessions_enabled_check(workspace_id=workspace_id)
    snapshot = services.session_snapshot(workspace_id=workspace_id, scope=scope, session_id=session_id)
    return 200, {
        "sessionId": str(snapshot.session_id),
        "message": f"Transcript of {snapshot.message_count} turns.",
        "snapshot": selectors.snapshot_payload(snapshot),
    }


def skill_upsert_answer(
    *, workspace_id: int, scope: MemoryScope, body: SkillUpsertIn
) -> tuple[int, dict[str, Any]]:
    skill_file, created = services.skill_file_upsert(
        workspace_id=workspace_id, scope=scope, path=body.path, content=body.content
    )
    return (201 if created else 200), {
        "skillFile": memory_selectors.skill_file_payload(skill_file),
        "created": created,
        "message": "Skill file created." if created else "Skill file updated.",
    }


def skill_list_answer(
    *, workspace_id: int, scope: MemoryScope, body: SkillListIn
) -> tuple[int, dict[str, Any]]:
    rows = selectors.skill_files_list(workspace_id=workspace_id, scope=scope, limit=body.limit)
    files = [memory_selectors.skill_file_payload(row) for row in rows]
    return 200, {"skillFiles": files, "count": len(files)}


def skill_delete_answer(
    *, workspace_id: int, scope: MemoryScope, body: SkillDeleteIn
) -> tuple[int, dict[str, Any]]:
    services.skill_file_delete(workspace_id=workspace_id, scope=scope, path=body.path)
    return 200, {"path": body.path, "deleted": True, "message": "Skill file deleted."}


def skill_promote_answer(
    *, workspace_id: int, scope: MemoryScope, body: SkillPromoteIn
) -> tuple[int, dict[str, Any]]:
    services.procedural_enabled_check(workspace_id=workspace_id)
    promoted = services.skill_file_promote(
        workspace_id=workspace_id,
        scope=scope,
        session_id=body.sessionId,
        snapshot_id=body.snapshotId,
        path=body.path,
        title=body.title,
        procedure_key=body.procedureKey,
        max_steps=body.maxSteps,
    )
    return (201 if promoted.created else 200), {
        "skillFile": memory_selectors.skill_file_payload(promoted.skill_file),
        "created": promoted.created,
        "source": {
            "sessionId": str(promoted.session.id),
            "snapshotId": str(promoted.snapshot.id),
            "snapshotSlug": promoted.snapshot.slug,
            "snapshotCreatedAt": promoted.snapshot.created_at,
        },
        "method": promoted.method,
        "message": "Procedure created." if promoted.created else "Procedure updated.",
    }
