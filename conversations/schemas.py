"""Request and response schemas of sessions/* and skills/files/*."""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, Field, StringConstraints, field_validator, model_validator

from config.schemas import (
    ApiDateTime,
    AwareInstant,
    ScopeIn,
    ScopeQuery,
    StrictIn,
    Trimmed,
    scope_field,
    text_problem,
)
from memories.schemas import METADATA_DESCRIPTION, MemoryOut, SkillFileOut, metadata_problem

TurnRole = Literal["user", "assistant", "system", "tool"]
TurnKind = Literal["message", "tool_call", "tool_result", "event", "checkpoint"]
SessionStatus = Literal["active", "closed", "compacted"]
MAX_TURN_CHARS = 16_000
MAX_BATCH_TURNS = 500
MAX_TURN_INDEX = 10_000_000
MAX_SKILL_FILE_CHARS = 120_000


def _metadata(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is not None:
        problem = metadata_problem(value)
        if problem is not None:
            raise ValueError(problem)
    return value


class SessionStartIn(StrictIn):
    title: Annotated[str, Trimmed(240)] | None = Field(None, description="What the session is about, ≤ 240.")
    client: Annotated[str, Trimmed(120)] | None = Field(
        None, description="The client recording it (an agent, a chat app), ≤ 120."
    )
    metadata: dict[str, Any] | None = Field(None, description=METADATA_DESCRIPTION)
    scope: ScopeIn = scope_field()

    _check_metadata = field_validator("metadata")(_metadata)


class SessionOut(Schema):
    id: str = Field(description="Session id.")
    scope: Literal["global", "project"] = Field(description="project when started with a projectId.")
    projectId: str | None = Field(description="The project it belongs to.")
    userId: str | None = Field(description="The end user it belongs to.")
    client: str | None = Field(description="The client that started it.")
    status: SessionStatus = Field(description="active until sessions/end; then closed or compacted.")
    title: str | None = Field(description="Its title.")
    turnCount: int = Field(description="Turns recorded so far.")
    tokenCount: int = Field(description="The sum of the turns' tokenCount.")
    summaryMemoryId: str | None = Field(description="The memory holding its summary, once ended.")
    startedAt: ApiDateTime = Field(description="When it was started.")
    lastActivityAt: ApiDateTime = Field(description="Its last turn or change.")
    endedAt: ApiDateTime | None = Field(description="When it was ended.")
    metadata: dict[str, Any] | None = Field(description="The caller's metadata.")


class SessionStartOut(Schema):
    sessionId: str = Field(description="The new session's id.")
    message: str = Field(description="What happened.")
    session: SessionOut = Field(description="The session.")


class TurnIn(StrictIn):
    content: Annotated[str, Trimmed(MAX_TURN_CHARS)] = Field(description="What was said, 1–16000 characters.")
    role: TurnRole = Field("user", description="user, assistant, system or tool (default user).")
    kind: TurnKind = Field(
        "message", description="message (default), tool_call, tool_result, event or checkpoint."
    )
    speaker: Annotated[str, Trimmed(120)] | None = Field(
        None,
        description="Who said it, by name (≤ 120): a question naming the speaker ranks their turns first.",
    )
    saidAt: AwareInstant | None = Field(
        None, description="When it was said, with a time zone (default: now); may be in the past."
    )
    turnIndex: int | None = Field(
        None,
        ge=0,
        le=MAX_TURN_INDEX,
        description="Its place in the session from 0 (default: after the last one). Sending the same index "
        "and content again returns the stored turn (safe retries); another content is 409.",
    )
    tokenCount: int | None = Field(None, ge=0, le=10_000_000, description="Its size in tokens, if known.")
    isMeaningful: bool = Field(
        True,
        description="false for filler (greetings, acknowledgements): kept in the transcript, ranked with the "
        "lowest importance.",
    )
    metadata: dict[str, Any] | None = Field(None, description=METADATA_DESCRIPTION)

    _check_metadata = field_validator("metadata")(_metadata)


class CheckpointIn(TurnIn):
    sessionId: Annotated[str, Trimmed(64)] = Field(description="The session, from sessions/start.")
    scope: ScopeIn = scope_field()


class TurnEventOut(Schema):
    id: str = Field(description="The turn's memory id.")
    sessionId: str = Field(description="Its session.")
    kind: str = Field(description="message, tool_call, tool_result, event or checkpoint.")
    role: str | None = Field(description="user, assistant, system or tool.")
    speaker: str | None = Field(description="Who said it.")
    turnIndex: int = Field(description="Its place in the session, from 0.")
    saidAt: ApiDateTime | None = Field(description="When it was said.")
    tokenCount: int | None = Field(None, description="Its size in tokens, as sent.")
    isMeaningful: bool = Field(True, description="false for filler.")
    replayed: bool = Field(False, description="true when this turn was already stored (a retry).")
    memory: MemoryOut = Field(description="The turn's memory.")


class CheckpointOut(Schema):
    sessionId: str = Field(description="The session.")
    eventId: str = Field(description="The turn's memory id.")
    message: str = Field(description="What happened.")
    event: TurnEventOut = Field(description="The turn.")


class TurnsIn(StrictIn):
    sessionId: Annotated[str, Trimmed(64)] = Field(description="The session, from sessions/start.")
    turns: list[TurnIn] = Field(
        min_length=1, max_length=MAX_BATCH_TURNS, description="1–500 turns, in the order they were said."
    )
    scope: ScopeIn = scope_field()

    @model_validator(mode="after")
    def _distinct_indexes(self) -> TurnsIn:
        given = [turn.turnIndex for turn in self.turns if turn.turnIndex is not None]
        if len(given) != len(set(given)):
            raise ValueError("two turns of the batch have the same turnIndex")
        return self


class TurnsOut(Schema):
    sessionId: str = Field(description="The session.")
    count: int = Field(description="Turns in the batch.")
    created: int = Field(description="Turns newly stored (the rest were already there: retries).")
    message: str = Field(description="What happened.")
    events: list[TurnEventOut] = Field(description="The turns, in the order sent.")


class SessionEndIn(StrictIn):
    sessionId: Annotated[str, Trimmed(64)] = Field(description="The session to end.")
    status: Literal["closed", "compacted"] = Field("closed", description="closed (default) or compacted.")
    scope: ScopeIn = scope_field()


class SummaryOut(Schema):
    memoryId: str = Field(description="The memory holding the summary (conversation.kind summary).")
    content: str = Field(description="The summary.")
    method: Literal["llm", "extractive"] = Field(
        description="llm when the summary model wrote it; extractive otherwise (no model, or it failed)."
    )
    fallbackReason: str | None = Field(
        None, description="Why a configured model did not write it (its error code)."
    )


class SnapshotOut(Schema):
    id: str = Field(description="Snapshot id.")
    sessionId: str = Field(description="Its session.")
    slug: str = Field(description="A readable name: the title's words and the snapshot's time.")
    sourceTrigger: Literal["session_end", "snapshot_request"] = Field(description="What took it.")
    transcriptMd: str = Field(description="The transcript as Markdown, turns in order.")
    messageCount: int = Field(description="Turns it holds.")
    createdAt: ApiDateTime = Field(description="When it was taken.")


class SessionEndOut(Schema):
    sessionId: str = Field(description="The session.")
    message: str = Field(description="What happened.")
    session: SessionOut = Field(description="The session, ended.")
    summary: SummaryOut | None = Field(description="null when the session has no turn.")
    snapshot: SnapshotOut = Field(description="Its transcript as it ended.")


class SnapshotQuery(ScopeQuery):
    pass


class SessionSnapshotIn(StrictIn):
    """The MCP tool's request for a session's transcript (the route takes the session in its path)."""

    sessionId: Annotated[str, Trimmed(64)] = Field(description="The session.")
    scope: ScopeIn = scope_field()


class SessionSnapshotOut(Schema):
    sessionId: str = Field(description="The session.")
    message: str = Field(description="What happened.")
    snapshot: SnapshotOut = Field(description="The snapshot.")


# A skill file's path: relative, slash-separated, no empty, "." or ".." segment, no control characters or
# backslashes (it names a file an agent may write to its disk).
_PATH_SEGMENT = re.compile(r"^[^\x00-\x1f\x7f\\/]+$")


def _check_path(value: str) -> str:
    if value.startswith("/"):
        raise ValueError("path must be relative (no leading /)")
    for segment in value.split("/"):
        if segment in ("", ".", "..") or not _PATH_SEGMENT.match(segment):
            raise ValueError(
                "path must be slash-separated names without empty, '.' or '..' parts, backslashes or control "
                "characters, e.g. skills/deploy/SKILL.md"
            )
    return value


SkillPath = Annotated[str, Trimmed(400)]


def _file_text(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    if not value.strip():
        raise ValueError("must not be blank")
    return value


# A file's text is kept byte for byte (a trailing newline is part of it), unlike the trimmed fields.
FileText = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_SKILL_FILE_CHARS), AfterValidator(_file_text)
]


class SkillUpsertIn(StrictIn):
    path: SkillPath = Field(description="Where the file lives, e.g. skills/deploy/SKILL.md (1–400).")
    content: FileText = Field(description="Its text, 1–120000 characters, stored as sent.")
    scope: ScopeIn = scope_field()

    _path = field_validator("path")(_check_path)


class SkillUpsertOut(Schema):
    skillFile: SkillFileOut = Field(description="The file as stored.")
    created: bool = Field(description="true when new, false when replaced.")
    message: str = Field(description="What happened.")


class SkillListIn(StrictIn):
    limit: int = Field(50, ge=1, le=100, description="1–100 (default 50), newest change first.")
    scope: ScopeIn = scope_field()


class SkillListOut(Schema):
    skillFiles: list[SkillFileOut] = Field(description="The files, newest change first.")
    count: int = Field(description="How many.")


class SkillDeleteIn(StrictIn):
    path: SkillPath = Field(description="The file's path.")
    scope: ScopeIn = scope_field()

    _path = field_validator("path")(_check_path)


class SkillDeleteOut(Schema):
    path: str = Field(description="The deleted file's path.")
    deleted: bool = Field(description="Always true.")
    message: str = Field(description="What happened.")


class SkillPromoteIn(StrictIn):
    sessionId: Annotated[str, Trimmed(64)] = Field(description="The session to learn the procedure from.")
    snapshotId: Annotated[str, Trimmed(64)] | None = Field(
        None, description="One of its snapshots (default: its transcript as it stands now)."
    )
    path: SkillPath = Field(description="Where the procedure file goes, e.g. skills/release/SKILL.md.")
    title: Annotated[str, Trimmed(200)] = Field(description="The procedure's title, 1–200.")
    procedureKey: Annotated[str, Trimmed(120)] = Field(
        description="A stable name for the procedure (1–120), e.g. release-backend."
    )
    maxSteps: int = Field(8, ge=3, le=20, description="Most steps, 3–20 (default 8).")
    scope: ScopeIn = scope_field()

    _path = field_validator("path")(_check_path)


class PromoteSourceOut(Schema):
    sessionId: str = Field(description="The session.")
    snapshotId: str = Field(description="The snapshot promoted.")
    snapshotSlug: str = Field(description="The snapshot's slug.")
    snapshotCreatedAt: ApiDateTime = Field(description="When the snapshot was taken.")


class SkillPromoteOut(Schema):
    skillFile: SkillFileOut = Field(description="The procedure file.")
    created: bool = Field(description="true when new, false when replaced.")
    source: PromoteSourceOut = Field(description="What it was promoted from.")
    method: Literal["llm", "outline"] = Field(
        description="llm when the model extracted the steps; outline (deterministic) otherwise."
    )
    message: str = Field(description="What happened.")


# --- export file records ------------------------------------------------------------------------------------


class SessionRecordIn(StrictIn):
    """A session line of a workspace export file (its turns are memory lines that name it)."""

    id: uuid.UUID = Field(description="The session's id in the workspace it was exported from.")
    scope: Literal["global", "project"] = Field(description="project exactly when projectId is set.")
    projectId: Annotated[str, Trimmed(240)] | None = Field(None, description="As scope.projectId.")
    userId: Annotated[str, Trimmed(120)] | None = Field(None, description="As scope.userId.")
    client: Annotated[str, Trimmed(120)] | None = Field(None, description="As sessions/start.")
    title: Annotated[str, Trimmed(240)] | None = Field(None, description="As sessions/start.")
    status: SessionStatus = Field(description="active, closed or compacted.")
    metadata: dict[str, Any] | None = Field(None, description=METADATA_DESCRIPTION)
    turnCount: int = Field(0, ge=0, le=MAX_TURN_INDEX, description="Turns recorded.")
    tokenCount: int = Field(0, ge=0, le=2**62, description="Tokens recorded.")
    nextTurnIndex: int = Field(0, ge=0, le=MAX_TURN_INDEX + 1, description="The next turn's index.")
    summaryMemoryId: uuid.UUID | None = Field(None, description="The memory line holding its summary.")
    startedAt: AwareInstant = Field(description="When it was started.")
    lastActivityAt: AwareInstant = Field(description="Its last activity.")
    endedAt: AwareInstant | None = Field(None, description="When it was ended.")

    _check_metadata = field_validator("metadata")(_metadata)

    @model_validator(mode="after")
    def _scope_matches_project(self) -> SessionRecordIn:
        if (self.scope == "project") != (self.projectId is not None):
            raise ValueError("scope must be project exactly when projectId is set")
        return self


class SkillFileRecordIn(StrictIn):
    """A skill file line of a workspace export file."""

    scope: Literal["global", "project"] = Field(description="project exactly when projectId is set.")
    projectId: Annotated[str, Trimmed(240)] | None = Field(None, description="As scope.projectId.")
    userId: Annotated[str, Trimmed(120)] | None = Field(None, description="As scope.userId.")
    path: SkillPath = Field(description="As skills/files/upsert.")
    content: FileText = Field(description="As skills/files/upsert.")
    procedureKey: Annotated[str, Trimmed(120)] | None = Field(None, description="As promote.")
    sourceSessionId: uuid.UUID | None = Field(None, description="The session it was promoted from.")
    usageCount: int = Field(0, ge=0, le=2**31 - 1, description="context/get answers that returned it.")
    lastUsedAt: AwareInstant | None = Field(None, description="When one last did.")
    createdAt: AwareInstant = Field(description="When it was first written.")
    updatedAt: AwareInstant = Field(description="Its last change.")

    _path = field_validator("path")(_check_path)

    @model_validator(mode="after")
    def _scope_matches_project(self) -> SkillFileRecordIn:
        if (self.scope == "project") != (self.projectId is not None):
            raise ValueError("scope must be project exactly when projectId is set")
        return self
