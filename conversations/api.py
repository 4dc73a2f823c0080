"""SDK routes sessions/* and skills/files/*: thin handlers — resolve the workspace, open its RLS transaction,
build the answer (conversations.answers, shared with the MCP tools)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router, Status

from config.errors import success_envelope
from config.schemas import Envelope
from conversations import answers
from conversations.schemas import (
    CheckpointIn,
    CheckpointOut,
    SessionEndIn,
    SessionEndOut,
    SessionSnapshotOut,
    SessionStartIn,
    SessionStartOut,
    SkillDeleteIn,
    SkillDeleteOut,
    SkillListIn,
    SkillListOut,
    SkillPromoteIn,
    SkillPromoteOut,
    SkillUpsertIn,
    SkillUpsertOut,
    SnapshotQuery,
    TurnsIn,
    TurnsOut,
)
from memories.selectors import memory_scope
from tenancy.access import request_workspace_id
from tenancy.auth import SdkKeyAuth
from tenancy.policy import READ, WRITE, requires
from tenancy.rls import workspace_context

router = Router(tags=["sessions"], auth=SdkKeyAuth())
skills_router = Router(tags=["skills"], auth=SdkKeyAuth())

_DISABLED = (
    " 403 MEMORY_SESSION_DISABLED when the workspace turned sessions off (memories/settings sessionsEnabled)."
)


@router.post(
    "/sessions/start",
    response={201: Envelope[SessionStartOut]},
    summary="Start a session (a conversation or an agent's run), recorded turn by turn",
    description="Answers 201 with the session's id. Its turns are memories of the scope it was started with: "
    "send the same scope with its checkpoints." + _DISABLED,
)
@requires(WRITE)
def sessions_start(request: HttpRequest, payload: SessionStartIn) -> Status[dict[str, Any]]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        status, data = answers.session_start_answer(
            workspace_id=workspace_id, scope=memory_scope(payload.scope), body=payload
        )
    return Status(status, success_envelope(request, data))


@router.post(
    "/sessions/checkpoint",
    response={201: Envelope[CheckpointOut], 200: Envelope[CheckpointOut]},
    summary="Record one turn of a session",
    description="The turn becomes a memory of the session (conversation.kind, turnIndex, role, speaker, "
    "saidAt) that search, context, the graph and export see like any other. 201 when stored; 200 when the "
    "same turnIndex already holds the same text (a retry); 409 TURN_INDEX_TAKEN when it holds another; 409 "
    "SESSION_ENDED after sessions/end; 404 SESSION_NOT_FOUND." + _DISABLED,
)
@requires(WRITE)
def sessions_checkpoint(request: HttpRequest, payload: CheckpointIn) -> Status[dict[str, Any]]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        status, data = answers.session_checkpoint_answer(
            workspace_id=workspace_id, scope=memory_scope(payload.scope), body=payload
        )
    return Status(status, success_envelope(request, data))


@router.post(
    "/sessions/turns",
    response={201: Envelope[TurnsOut], 200: Envelope[TurnsOut]},
    summary="Record many turns of a session at once (a chat client uploading a conversation)",
    description="1–500 turns in one transaction, in the order given; each as sessions/checkpoint. Turns "
    "already stored at their turnIndex with the same text are answered, not stored again, so a failed upload "
    "can be sent again whole; any conflict (409 TURN_INDEX_TAKEN) stores nothing." + _DISABLED,
)
@requires(WRITE)
def sessions_turns(request: HttpRequest, payload: TurnsIn) -> Status[dict[str, Any]]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        status, data = answers.session_turns_answer(
            workspace_id=workspace_id, scope=memory_scope(payload.scope), body=payload
        )
    return Status(status, success_envelope(request, data))


@router.post(
    "/sessions/end",
    response=Envelope[SessionEndOut],
    summary="End a session: its summary becomes a memory, its transcript a snapshot",
    description="status closed (default) or compacted. The summary is written by the summary model when "
    "one is configured (GRAPH_LLM_MODEL_SUMMARY, else GRAPH_LLM_MODEL), else extractively from its most "
    "telling turns; a model failure falls back to extractive and says why (summary.fallbackReason). 409 "
    "SESSION_ENDED when already ended." + _DISABLED,
)
@requires(WRITE)
def sessions_end(request: HttpRequest, payload: SessionEndIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        _, data = answers.session_end_answer(
            workspace_id=workspace_id, scope=memory_scope(payload.scope), body=payload
        )
    return success_envelope(request, data)


@router.get(
    "/sessions/{session_id}/snapshot",
    response=Envelope[SessionSnapshotOut],
    summary="A session's transcript as Markdown, turns in order",
    description="The latest snapshot when the session has not changed since it was taken, else a new one. "
    "Scope as query parameters (tenantId, userId, projectId)." + _DISABLED,
)
@requires(READ)
def sessions_snapshot(request: HttpRequest, session_id: str, query: Query[SnapshotQuery]) -> dict[str, Any]:
    scope = query.scope()
    workspace_id = request_workspace_id(request, scope)
    with workspace_context(workspace_id):
        _, data = answers.session_snapshot_answer(
            workspace_id=workspace_id, scope=memory_scope(scope), session_id=session_id[:64]
        )
    return success_envelope(request, data)


@skills_router.post(
    "/skills/files/upsert",
    response={201: Envelope[SkillUpsertOut], 200: Envelope[SkillUpsertOut]},
    summary="Write a skill file (201 created, 200 replaced)",
    description="A file of instructions an agent loads, addressed by its relative path within the scope's "
    "userId / projectId. context/get returns the files matching its query (includeSkillFiles).",
)
@requires(WRITE)
def skills_upsert(request: HttpRequest, payload: SkillUpsertIn) -> Status[dict[str, Any]]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        status, data = answers.skill_upsert_answer(
            workspace_id=workspace_id, scope=memory_scope(payload.scope), body=payload
        )
    return Status(status, success_envelope(request, data))


@skills_router.post(
    "/skills/files/list", response=Envelope[SkillListOut], summary="List skill files, newest change first"
)
@requires(READ)
def skills_list(request: HttpRequest, payload: SkillListIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        _, data = answers.skill_list_answer(
            workspace_id=workspace_id, scope=memory_scope(payload.scope), body=payload
        )
    return success_envelope(request, data)


@skills_router.post(
    "/skills/files/delete",
    response=Envelope[SkillDeleteOut],
    summary="Delete a skill file",
    description="404 SKILL_FILE_NOT_FOUND when the scope has no file at that path.",
)
@requires(WRITE)
def skills_delete(request: HttpRequest, payload: SkillDeleteIn) -> dict[str, Any]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        _, data = answers.skill_delete_answer(
            workspace_id=workspace_id, scope=memory_scope(payload.scope), body=payload
        )
    return success_envelope(request, data)


@skills_router.post(
    "/skills/files/promote",
    response={201: Envelope[SkillPromoteOut], 200: Envelope[SkillPromoteOut]},
    summary="Turn a session into a procedure skill file (201 created, 200 replaced)",
    description="From a snapshot of the session (snapshotId; default: its transcript as it stands), the "
    "steps are extracted by the summary model when one is configured, else outlined deterministically "
    "(method). 404 SESSION_NOT_FOUND / SNAPSHOT_NOT_FOUND; 403 MEMORY_PROCEDURAL_DISABLED when the workspace "
    "turned promotion off (memories/settings proceduralEnabled).",
)
@requires(WRITE)
def skills_promote(request: HttpRequest, payload: SkillPromoteIn) -> Status[dict[str, Any]]:
    workspace_id = request_workspace_id(request, payload.scope)
    with workspace_context(workspace_id):
        status, data = answers.skill_promote_answer(
            workspace_id=workspace_id, scope=memory_scope(payload.scope), body=payload
        )
    return Status(status, success_envelope(request, data))
