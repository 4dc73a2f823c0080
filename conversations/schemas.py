"""Request and response schemas of sessions/* and skills/files/*."""

from __future__ import annotations

import re
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
    sessionId: str
    message: str
    session: SessionOut


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
    sessionId: str
    kind: str
    role: str | None
    speaker: str | None
    turnIndex: int
    saidAt: ApiDateTime | None
    tokenCount: int | None = None
    isMeaningful: bool = True
    replayed: bool = Field(False, description="true when this turn was already stored (a retry).")
    memory: MemoryOut


class CheckpointOut(Schema):
    sessionId: str
    eventId: str = Field(description="The turn's memory id.")
    message: str
    event: TurnEventOut


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
    sessionId: str
    count: int = Field(description="Turns in the batch.")
    created: int = Field(description="Turns newly stored (the rest were already there: retries).")
    message: str
    events: list[TurnEventOut]


class SessionEndIn(StrictIn):
    sessionId: Annotated[str, Trimmed(64)] = Field(description="The session to end.")
    status: Literal["closed", "compacted"] = Field("closed", description="closed (default) or compacted.")
    scope: ScopeIn = scope_field()


class SummaryOut(Schema):
    memoryId: str = Field(description="The memory holding the summary (conversation.kind summary).")
    content: str
    method: Literal["llm", "extractive"] = Field(
        description="llm when the summary model wrote it; extractive otherwise (no model, or it failed)."
    )
    fallbackReason: str | None = Field(
        None, description="Why a configured model did not write it (its error code)."
    )


class SnapshotOut(Schema):
    id: str
    sessionId: str
    slug: str = Field(description="A readable name: the title's words and the snapshot's time.")
    sourceTrigger: Literal["session_end", "snapshot_request"] = Field(description="What took it.")
    transcriptMd: str = Field(description="The transcript as Markdown, turns in order.")
    messageCount: int
    createdAt: ApiDateTime


class SessionEndOut(Schema):
    sessionId: str
    message: str
    session: SessionOut
    summary: SummaryOut | None = Field(description="null when the session has no turn.")
    snapshot: SnapshotOut


class SnapshotQuery(ScopeQuery):
    pass


class SessionSnapshotOut(Schema):
    sessionId: str
    message: str
    snapshot: SnapshotOut


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
    skillFile: SkillFileOut
    created: bool
    message: str


class SkillListIn(StrictIn):
    limit: int = Field(50, ge=1, le=100, description="1–100 (default 50), newest change first.")
    scope: ScopeIn = scope_field()


class SkillListOut(Schema):
    skillFiles: list[SkillFileOut]
    count: int


class SkillDeleteIn(StrictIn):
    path: SkillPath = Field(description="The file's path.")
    scope: ScopeIn = scope_field()

    _path = field_validator("path")(_check_path)


class SkillDeleteOut(Schema):
    path: str
    deleted: bool
    message: str


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
    sessionId: str
    snapshotId: str
    snapshotSlug: str
    snapshotCreatedAt: ApiDateTime


class SkillPromoteOut(Schema):
    skillFile: SkillFileOut
    created: bool
    source: PromoteSourceOut
    method: Literal["llm", "outline"] = Field(
        description="llm when the model extracted the steps; outline (deterministic) otherwise."
    )
    message: str
