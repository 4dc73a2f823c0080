"""Reads on sessions, their turns and snapshots, and skill files. Callers run inside
tenancy.rls.workspace_context; the workspace filter is explicit anyway (RLS is the backstop)."""

from __future__ import annotations

import uuid
from typing import Any

from config.errors import ApiError
from memories.models import Memory, MemorySession, SessionSnapshot, SkillFile
from memories.selectors import MemoryScope, owner_exact_q, owner_readable_q, parse_memory_id

# A transcript, a summary and an outline read at most this many turns of a session (the first ones).
SESSION_TURNS_READ_MAX = 5000


def session_not_found(session_id: str) -> ApiError:
    return ApiError(
        404,
        "SESSION_NOT_FOUND",
        f"No session {session_id} in this scope: check the id and send the scope (userId, projectId) it was "
        "started with.",
    )


def session_get(
    *,
    workspace_id: int,
    scope: MemoryScope,
    session_id: str,
    for_update: bool = False,
    writable: bool = False,
) -> MemorySession:
    """The session with this id that the scope may read (`writable`: that it owns exactly), or 404."""
    parsed = parse_memory_id(session_id)
    if parsed is None:
        raise session_not_found(session_id)
    rule = owner_exact_q(scope) if writable else owner_readable_q(scope)
    rows = MemorySession.objects.filter(rule, workspace_id=workspace_id, id=parsed)
    if for_update:
        rows = rows.select_for_update()
    found = rows.first()
    if found is None:
        raise session_not_found(session_id)
    return found


def session_turns(
    *, workspace_id: int, session: MemorySession, limit: int = SESSION_TURNS_READ_MAX
) -> list[Memory]:
    """The session's live turns in order (forgotten ones are gone from it as from everything else)."""
    return list(
        Memory.objects.filter(
            workspace_id=workspace_id,
            session_id=session.id,
            turn_index__isnull=False,
            deleted_at__isnull=True,
        ).order_by("turn_index")[:limit]
    )


def session_turns_at(*, workspace_id: int, session: MemorySession, indexes: list[int]) -> dict[int, Memory]:
    """The session's live turns at these indexes, by index."""
    rows = Memory.objects.filter(
        workspace_id=workspace_id, session_id=session.id, turn_index__in=indexes, deleted_at__isnull=True
    )
    return {row.turn_index: row for row in rows if row.turn_index is not None}


def snapshot_current(*, workspace_id: int, session: MemorySession) -> SessionSnapshot | None:
    """The latest snapshot if the session has not changed since it was taken."""
    latest = (
        SessionSnapshot.objects.filter(workspace_id=workspace_id, session_id=session.id)
        .order_by("-created_at", "-id")
        .first()
    )
    if (
        latest is not None
        and latest.message_count == session.turn_count
        and latest.last_activity_at == session.last_activity_at
    ):
        return latest
    return None


def snapshot_get(*, workspace_id: int, session: MemorySession, snapshot_id: str) -> SessionSnapshot:
    parsed = parse_memory_id(snapshot_id)
    found = (
        SessionSnapshot.objects.filter(workspace_id=workspace_id, session_id=session.id, id=parsed).first()
        if parsed is not None
        else None
    )
    if found is None:
        raise ApiError(
            404,
            "SNAPSHOT_NOT_FOUND",
            f"Session {session.id} has no snapshot {snapshot_id}: take one with sessions/{{id}}/snapshot, or "
            "leave snapshotId out to use its transcript as it stands.",
        )
    return found


def session_payload(session: MemorySession) -> dict[str, Any]:
    return {
        "id": str(session.id),
        "scope": session.scope,
        "projectId": session.project_id,
        "userId": session.user_id,
        "client": session.client,
        "status": session.status,
        "title": session.title,
        "turnCount": session.turn_count,
        "tokenCount": session.token_count,
        "summaryMemoryId": str(session.summary_memory_id) if session.summary_memory_id else None,
        "startedAt": session.started_at,
        "lastActivityAt": session.last_activity_at,
        "endedAt": session.ended_at,
        "metadata": session.metadata,
    }


def snapshot_payload(snapshot: SessionSnapshot) -> dict[str, Any]:
    return {
        "id": str(snapshot.id),
        "sessionId": str(snapshot.session_id),
        "slug": snapshot.slug,
        "sourceTrigger": snapshot.source_trigger,
        "transcriptMd": snapshot.transcript_md,
        "messageCount": snapshot.message_count,
        "createdAt": snapshot.created_at,
    }


def skill_files_list(*, workspace_id: int, scope: MemoryScope, limit: int) -> list[SkillFile]:
    return list(
        SkillFile.objects.filter(owner_readable_q(scope), workspace_id=workspace_id).order_by(
            "-updated_at", "-id"
        )[:limit]
    )


def skill_file_owned(*, workspace_id: int, scope: MemoryScope, path: str) -> SkillFile | None:
    return SkillFile.objects.filter(owner_exact_q(scope), workspace_id=workspace_id, path=path).first()


def skill_file_by_id(*, workspace_id: int, skill_file_id: uuid.UUID) -> SkillFile:
    return SkillFile.objects.get(workspace_id=workspace_id, id=skill_file_id)
