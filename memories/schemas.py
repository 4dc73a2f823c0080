"""Request and response schemas of memories/*: add, list, edit, forget, bulk-forget and vacuum (with cursors
and idempotency), and the hygiene routes consolidate and settings."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from django.conf import settings
from ninja import Schema
from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from config.schemas import (
    JSON_MAX_DEPTH,
    ApiDateTime,
    AwareInstant,
    ScopeIn,
    ScopeQuery,
    StrictIn,
    Trimmed,
    json_problem,
    scope_field,
)

MemoryType = Literal["rule", "decision", "fact", "note", "skill"]
MemoryLayer = Literal["rule", "working", "long_term"]

Content = Annotated[str, Trimmed(8000)]
Tag = Annotated[str, Trimmed(120)]
Path = Annotated[str, Trimmed(300)]
Category = Annotated[str, Trimmed(120)]
MAX_TAGS, MAX_PATHS = 50, 100
METADATA_DESCRIPTION = (
    f"Any JSON object up to MEMORY_METADATA_MAX_BYTES (16 KB) and {JSON_MAX_DEPTH} levels deep; finite "
    "numbers only (no NaN or Infinity), integers within 64 bits, no NUL or lone surrogates in keys or values."
)


def metadata_problem(value: dict[str, Any]) -> str | None:
    """Why a metadata object cannot be stored (config.schemas.json_problem, then its size), or None."""
    problem = json_problem(value, name="metadata")
    if problem is not None:
        return problem
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
    if size > settings.MEMORY_METADATA_MAX_BYTES:
        return f"metadata is {size} bytes as JSON; the limit is {settings.MEMORY_METADATA_MAX_BYTES}"
    return None


def _check_metadata(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is None:
        return value
    problem = metadata_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def embedding_models_allowed() -> tuple[str, ...]:
    """EMBEDDING_MODELS_ALLOWED and the server's own EMBEDDING_MODEL, always allowed."""
    return tuple(dict.fromkeys((*settings.EMBEDDING_MODELS_ALLOWED, settings.EMBEDDING_MODEL)))


def _check_embedding_model(value: str | None) -> str | None:
    """Only a model the operator allows: a caller never picks which provider the server calls."""
    allowed = embedding_models_allowed()
    if value is not None and value not in allowed:
        raise PydanticCustomError(
            "embedding_model_not_allowed",
            "this server embeds with {allowed} only",
            {"allowed": ", ".join(allowed)},
        )
    return value


class DictOut(BaseModel):
    """An answer built from dicts (selectors.memory_payload and friends): plain pydantic. ninja's Schema wraps
    every nested object in an attribute getter so it can read ORM instances; for a context/get with 100 rules
    that wrapping was a third of the request's CPU (measured by bench/context_latency.py)."""


class PipelineStepOut(DictOut):
    status: Literal["queued", "processing", "succeeded", "dead_letter"] = Field(
        description="State of this step."
    )
    attempts: int = Field(description="Attempts so far (at most 5, then dead_letter).")
    lastErrorCode: str | None = Field(description="Code of the last failure, e.g. EMBEDDING_FAILED.")


class PipelineOut(DictOut):
    status: Literal["queued", "processing", "succeeded", "dead_letter"] = Field(
        description="Overall: dead_letter if any step is, else processing, else queued, else succeeded."
    )
    steps: dict[str, PipelineStepOut] = Field(description="Per step: embed, similarity.")


class ConversationOut(DictOut):
    sessionId: str = Field(description="The session the memory belongs to.")
    kind: str | None = Field(
        description="message, tool_call, tool_result, event or checkpoint for a turn; summary for the "
        "session's summary."
    )
    turnIndex: int | None = Field(description="Its place in the session, from 0; null for a summary.")
    role: str | None = Field(description="user, assistant, system or tool.")
    speaker: str | None = Field(description="Who said it (a person's or agent's name), when given.")
    saidAt: ApiDateTime | None = Field(description="When it was said (may be long before it was stored).")


class MemoryOut(DictOut):
    id: str = Field(description="Memory id.")
    content: str = Field(description="The memory text as stored.")
    type: MemoryType = Field(description="rule, decision, fact, note or skill.")
    layer: MemoryLayer = Field(description="rule, working (expires) or long_term.")
    expiresAt: ApiDateTime | None = Field(description="When a working memory expires; null otherwise.")
    scope: Literal["global", "project"] = Field(description="project when written with a projectId.")
    projectId: str | None = Field(description="The project the memory belongs to, if any.")
    tags: list[str] = Field(description="Tags.")
    paths: list[str] = Field(description="File paths the memory is about.")
    category: str | None = Field(description="Category.")
    metadata: dict[str, Any] | None = Field(description="Caller's metadata object.")
    createdAt: ApiDateTime = Field(
        description="When it was written (or the time given in metadata on import)."
    )
    updatedAt: ApiDateTime = Field(description="Last change.")
    injectionFlags: list[str] = Field(
        description="Prompt-injection patterns found in the content; flagged memories are kept and "
        "searchable but skipped by LLM extraction."
    )
    importance: float = Field(
        0.5,
        description="Write-time importance 0–1 (markers such as 'important:', length, role); blended into "
        "ranking with importanceWeight.",
    )
    supersededBy: str | None = Field(
        None,
        description="The newer memory that replaced this one in memories/consolidate; superseded memories "
        "are left out of search, list and context unless includeSuperseded is true.",
    )
    conversation: ConversationOut | None = Field(
        None,
        description="Set on a conversation turn (sessions/checkpoint, sessions/turns) and on a session's "
        "summary: its session, kind, turn index, role, speaker and when it was said; null otherwise.",
    )
    pipeline: PipelineOut | None = Field(
        None, description="Background processing (embedding, similarity edges)."
    )


class SkillFileOut(Schema):
    """A skill file as skills/files/* and context/get answer it."""

    id: str = Field(description="Skill file id.")
    path: str = Field(description="Its relative path, e.g. skills/deploy/SKILL.md.")
    content: str = Field(description="Its text, as written.")
    scope: Literal["global", "project"] = Field(description="project when written with a projectId.")
    projectId: str | None = Field(description="The project it belongs to.")
    userId: str | None = Field(description="The end user it belongs to.")
    procedureKey: str | None = Field(description="Set on a file promoted from a session.")
    sourceSessionId: str | None = Field(description="The session it was promoted from.")
    sourceSnapshotId: str | None = Field(description="The snapshot of that session it was promoted from.")
    usageCount: int = Field(description="How many context/get answers returned it.")
    lastUsedAt: ApiDateTime | None = Field(description="When a context/get last returned it.")
    createdAt: ApiDateTime = Field(description="When it was first written.")
    updatedAt: ApiDateTime = Field(description="Its last change.")


class AddIn(StrictIn):
    content: Content = Field(description="The memory text, 1–8000 characters.")
    type: MemoryType = Field("note", description="Kind of memory. Default note.")
    layer: MemoryLayer | None = Field(None, description="Default: rule for type rule, otherwise long_term.")
    tags: list[Tag] = Field(
        default_factory=list, max_length=MAX_TAGS, description="Up to 50 tags of 1–120 chars."
    )
    paths: list[Path] = Field(
        default_factory=list, max_length=MAX_PATHS, description="Up to 100 paths of 1–300 chars."
    )
    category: Category | None = Field(None, description="Category, 1–120 chars.")
    metadata: dict[str, Any] | None = Field(None, description=METADATA_DESCRIPTION)
    embeddingModel: Annotated[str, Trimmed(160)] | None = Field(
        None,
        description="Embedding model for this memory, one the server allows (EMBEDDING_MODELS_ALLOWED; "
        "default: the local models and the server's default model); anything else is 400 "
        "EMBEDDING_MODEL_NOT_ALLOWED naming the allowed ones. Omitted: the server's default.",
    )
    scope: ScopeIn = scope_field()

    _metadata = field_validator("metadata")(_check_metadata)
    _embedding_model = field_validator("embeddingModel")(_check_embedding_model)


class AdmissionOut(Schema):
    admitted: bool = Field(description="Whether the memory was written.")
    reason: Literal["FAST_PATH", "SCORE", "NEAR_DUPLICATE", "LOW_SCORE"] = Field(
        description="FAST_PATH: score ≥ threshold + margin; SCORE: composite ≥ threshold; NEAR_DUPLICATE: an "
        "existing memory is (nearly) the same text; LOW_SCORE: composite below the threshold."
    )
    score: float = Field(description="The A-MAC composite score, 0–1.")
    nearestMemoryId: str | None = Field(description="The closest existing memory in scope, if any.")
    similarity: float | None = Field(description="Its cosine similarity (1.0 for the exact same text).")
    factors: dict[str, float] = Field(
        description="future_utility, factual_confidence, semantic_novelty, temporal_recency, "
        "content_type_prior."
    )


class AddOut(Schema):
    id: str = Field(
        description="Id of the new memory (or of the first one, on an idempotent replay; or of the existing "
        "memory when admission control refused this one)."
    )
    message: str = Field(description="Human-readable outcome.")
    memory: MemoryOut = Field(description="The stored memory (the existing one when not admitted).")
    admitted: bool = Field(
        True, description="False when admission control refused the memory (nothing written)."
    )
    admission: AdmissionOut | None = Field(
        None, description="The admission decision, when the workspace has admission control on."
    )
    embeddingModel: str = Field(description="Embedding model that will embed this memory.")
    embeddingModelSource: Literal["request", "workspace_default"] = Field(
        description="Where the model came from."
    )


class ListIn(StrictIn):
    type: MemoryType | None = Field(None, description="Only this type.")
    layer: MemoryLayer | None = Field(None, description="Only this layer.")
    tags: Annotated[str, Trimmed(120)] | None = Field(
        None, description="Substring matched against the comma-joined tags."
    )
    limit: int = Field(20, ge=1, le=100, description="Page size 1–100, default 20.")
    cursor: Annotated[str, Trimmed(200)] | None = Field(None, description="nextCursor of the previous page.")
    includeSuperseded: bool = Field(False, description="Also list memories consolidation superseded.")
    scope: ScopeIn = scope_field()


class ListOut(Schema):
    memories: list[MemoryOut] = Field(description="Newest first.")
    count: int = Field(description="Memories on this page.")
    nextCursor: str | None = Field(description="Pass as cursor for the next page; null on the last page.")


class EditIn(StrictIn):
    id: Annotated[str, Trimmed(64)] = Field(description="Memory id.")
    content: Content | None = Field(None, description="New text.")
    type: MemoryType | None = Field(
        None, description="New type; rule without layer also makes the layer rule."
    )
    layer: MemoryLayer | None = Field(
        None, description="New layer; working restarts the expiry, others clear it."
    )
    tags: list[Tag] | None = Field(None, max_length=MAX_TAGS, description="Replaces the tags.")
    paths: list[Path] | None = Field(None, max_length=MAX_PATHS, description="Replaces the paths.")
    category: Category | None = Field(None, description="New category.")
    metadata: dict[str, Any] | None = Field(
        None, description="Replaces the metadata; null clears it. " + METADATA_DESCRIPTION
    )
    embeddingModel: Annotated[str, Trimmed(160)] | None = Field(
        None,
        description="Embedding model for this memory, one the server allows (EMBEDDING_MODELS_ALLOWED); "
        "anything else is 400 EMBEDDING_MODEL_NOT_ALLOWED naming the allowed ones.",
    )
    scope: ScopeIn = scope_field()

    _metadata = field_validator("metadata")(_check_metadata)
    _embedding_model = field_validator("embeddingModel")(_check_embedding_model)


class EditOut(Schema):
    id: str = Field(description="Memory id.")
    updated: bool = Field(description="Always true on success.")
    message: str = Field(description="Human-readable outcome.")
    embeddingModel: str = Field(description="Embedding model for this memory.")
    embeddingModelSource: Literal["request", "workspace_default"] = Field(
        description="Where the model came from."
    )
    memory: MemoryOut = Field(description="The memory after the change.")


class ConversationRecordIn(StrictIn):
    """A turn's (or a session summary's) place in its session, as an export file carries it."""

    sessionId: uuid.UUID = Field(description="The session's id in the workspace it was exported from.")
    kind: Literal["message", "tool_call", "tool_result", "event", "checkpoint", "summary"] = Field(
        description="As sessions/checkpoint; summary for a session's summary."
    )
    turnIndex: int | None = Field(None, ge=0, le=10_000_000, description="Null exactly for a summary.")
    role: Literal["user", "assistant", "system", "tool"] | None = Field(None, description="As checkpoint.")
    speaker: Annotated[str, Trimmed(120)] | None = Field(None, description="As checkpoint.")
    saidAt: AwareInstant | None = Field(None, description="When it was said.")

    @model_validator(mode="after")
    def _summary_has_no_index(self) -> ConversationRecordIn:
        if (self.kind == "summary") != (self.turnIndex is None):
            raise ValueError("turnIndex must be null exactly for kind summary")
        return self


# A turn may be twice as long as a memory memories/add takes (sessions/checkpoint's limit).
TURN_MAX_CHARS = 16_000


class MemoryRecordIn(StrictIn):
    """A memory line of a workspace export file, checked by the same field rules as memories/add and
    memories/edit, plus the fields only an export carries (its id, times, end user, importance, its place
    in a conversation)."""

    id: uuid.UUID = Field(description="The memory's id in the workspace it was exported from.")
    # Before content: content's limit depends on it.
    conversation: ConversationRecordIn | None = Field(
        None, description="Set on a conversation turn and a session's summary."
    )
    content: Annotated[str, Trimmed(TURN_MAX_CHARS)] = Field(
        description="As memories/add (a conversation turn: up to 16000 characters)."
    )
    type: MemoryType = Field(description="As memories/add.")
    layer: MemoryLayer = Field(description="As memories/add.")
    scope: Literal["global", "project"] = Field(description="project exactly when projectId is set.")
    projectId: Annotated[str, Trimmed(240)] | None = Field(None, description="As scope.projectId.")
    userId: Annotated[str, Trimmed(120)] | None = Field(None, description="As scope.userId.")
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS, description="As memories/add.")
    paths: list[Path] = Field(default_factory=list, max_length=MAX_PATHS, description="As memories/add.")
    category: Category | None = Field(None, description="As memories/add.")
    metadata: dict[str, Any] | None = Field(None, description=METADATA_DESCRIPTION)
    embeddingModel: Annotated[str, Trimmed(160)] | None = Field(
        None, description="As memories/add: only a model this server allows."
    )
    injectionFlags: list[Annotated[str, Trimmed(40)]] = Field(
        default_factory=list,
        max_length=50,
        description="Ignored: the importing server finds the prompt-injection patterns itself.",
    )
    createdAt: AwareInstant = Field(description="When it was written.")
    updatedAt: AwareInstant | None = Field(None, description="Last change; default createdAt.")
    expiresAt: AwareInstant | None = Field(None, description="When a working memory expires.")
    deletedAt: AwareInstant | None = Field(None, description="When it was forgotten (a tombstone).")
    importance: float = Field(0.5, ge=0, le=1, description="Write-time importance 0–1.")
    supersededBy: uuid.UUID | None = Field(None, description="The memory of the same file that replaced it.")

    _metadata = field_validator("metadata")(_check_metadata)
    _embedding_model = field_validator("embeddingModel")(_check_embedding_model)

    @model_validator(mode="after")
    def _scope_matches_project(self) -> MemoryRecordIn:
        if (self.scope == "project") != (self.projectId is not None):
            raise ValueError("scope must be project exactly when projectId is set")
        return self

    @field_validator("content")
    @classmethod
    def _memory_content_limit(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("conversation") is None and len(value) > 8000:
            raise ValueError("should have at most 8000 characters (a memory that is no conversation turn)")
        return value


class ForgetIn(StrictIn):
    id: Annotated[str, Trimmed(64)] = Field(description="Memory id.")
    scope: ScopeIn = scope_field()


class ForgetOut(Schema):
    id: str = Field(description="Memory id.")
    deleted: bool = Field(description="Always true on success; vacuum deletes for good.")
    message: str = Field(description="Human-readable outcome.")


class BulkForgetFilters(StrictIn):
    types: list[MemoryType] | None = Field(None, max_length=5, description="Memories of these types.")
    tags: list[Annotated[str, Trimmed(128)]] | None = Field(
        None, max_length=50, description="Memories carrying any of these tags."
    )
    olderThanDays: int | None = Field(None, ge=1, le=36500, description="Created more than N days ago.")
    pattern: Annotated[str, Trimmed(500)] | None = Field(
        None,
        description="Glob over the whole content: * any text, ? one character (use *word* for a substring).",
    )
    projectId: Annotated[str, Trimmed(240)] | None = Field(
        None, description="Narrow to one project (not enough on its own)."
    )
    all: bool | None = Field(None, description="Everything in scope; must be the only filter.")


class BulkForgetIn(StrictIn):
    filters: BulkForgetFilters = Field(description="What to forget; see BulkForgetFilters.")
    dryRun: bool = Field(False, description="Count and preview without deleting.")
    scope: ScopeIn = scope_field()


class BulkForgetPreview(Schema):
    id: str = Field(description="Memory id.")
    type: MemoryType = Field(description="Memory type.")
    contentPreview: str = Field(description="First 80 characters.")


class BulkForgetOut(Schema):
    count: int = Field(description="Matching memories (dry run) or memories forgotten (real run).")
    ids: list[str] | None = Field(None, description="Forgotten ids (real run).")
    memories: list[BulkForgetPreview] | None = Field(None, description="Up to 1000 previews (dry run).")
    hasMore: bool = Field(False, description="Real run: more matched than one call forgets; call again.")
    message: str = Field(description="Human-readable outcome.")


class VacuumIn(StrictIn):
    scope: ScopeIn = scope_field()


class VacuumOut(Schema):
    purged: int = Field(description="Forgotten memories deleted for good.")
    message: str = Field(description="Human-readable outcome.")


# --- hygiene: memories/consolidate and memories/settings ----------------------------------------------------


class ConsolidateIn(StrictIn):
    types: list[MemoryType] | None = Field(None, max_length=5, description="Only memories of these types.")
    includeGlobal: bool = Field(True, description="With a projectId: also consolidate global memories.")
    globalOnly: bool = Field(False, description="Only global memories.")
    dryRun: bool = Field(False, description="Report what would be superseded without changing anything.")
    model: Annotated[str, Trimmed(160)] | None = Field(
        None, description="Recorded on the run only (consolidation is deterministic)."
    )
    scope: ScopeIn = scope_field()


class ConsolidationRunOut(Schema):
    id: str | None = Field(description="Run id; null on a dry run (dry runs are not recorded).")
    scope: Literal["global", "project"] = Field(description="project when called with a projectId.")
    projectId: str | None = Field(description="The projectId of the call.")
    userId: str | None = Field(description="The userId of the call.")
    inputCount: int = Field(
        description="Memories considered (at most MEMORY_CONSOLIDATION_MAX_INPUT, newest)."
    )
    mergedCount: int = Field(description="Groups with more than one memory (each keeps its newest).")
    supersededCount: int = Field(description="Memories marked superseded.")
    conflictedCount: int = Field(description="Superseded memories whose text differed from the winner's.")
    model: str | None = Field(description="The model given in the request, if any.")
    createdAt: datetime = Field(description="When the run happened.")
    metadata: dict[str, Any] | None = Field(description="The options of the run.")


class ConsolidateOut(Schema):
    runId: str | None = Field(description="Id of the recorded run; null on a dry run.")
    dryRun: bool = Field(description="Whether this was a dry run.")
    message: str = Field(description="Human-readable outcome.")
    run: ConsolidationRunOut = Field(description="The run and its counts.")
    winnerMemoryIds: list[str] = Field(description="The newest memory of each merged group.")
    supersededMemoryIds: list[str] = Field(
        description="The memories superseded (or that would be, on a dry run)."
    )


class MemorySettingsOut(Schema):
    redactCredentials: bool = Field(
        description="Secrets become typed placeholders in context text (default true)."
    )
    scrubAtRest: bool = Field(
        description="Secrets are also replaced in stored content at write time (default false)."
    )
    admissionEnabled: bool = Field(description="A-MAC admission control on memories/add (default false).")
    admissionThreshold: float = Field(
        description="Composite score a memory needs to be admitted (default 0.40)."
    )
    admissionFastPathMargin: float = Field(
        description="Server setting: admit without a model at threshold + this."
    )
    admissionDuplicateCosine: float = Field(
        description="Server setting: cosine at or above which a new memory is refused as a near-duplicate."
    )
    importanceWeight: float = Field(
        description="Weight of importance in ranking when a request gives none (default 0.15)."
    )
    halfLifeDays: float = Field(
        description="Temporal decay of memories/search and context/get when a request gives none: a "
        "memory's recency share of its score halves every this many days (default 30; 0: off)."
    )
    mmrLambda: float = Field(
        description="MMR diversity of memories/search and context/get when a request gives none: 1 ranks "
        "by relevance only (off), lower values trade relevance for variety (default 0.7)."
    )
    sessionsEnabled: bool = Field(
        True, description="sessions/* answer; false: 403 MEMORY_SESSION_DISABLED (default true)."
    )
    proceduralEnabled: bool = Field(
        True,
        description="skills/files/promote answers; false: 403 MEMORY_PROCEDURAL_DISABLED (default true).",
    )


class MemorySettingsPatchIn(StrictIn):
    redactCredentials: bool | None = Field(None, description="Scrub secrets from context text.")
    scrubAtRest: bool | None = Field(None, description="Scrub secrets from content before it is stored.")
    admissionEnabled: bool | None = Field(None, description="Turn admission control on or off.")
    admissionThreshold: float | None = Field(
        None, ge=0, le=1, description="0–1; null restores the server default."
    )
    importanceWeight: float | None = Field(
        None, ge=0, le=1, description="0–1; null restores the server default."
    )
    halfLifeDays: float | None = Field(
        None, ge=0, le=3650, description="0–3650 days, 0 turns decay off; null restores the server default."
    )
    mmrLambda: float | None = Field(
        None, ge=0, le=1, description="0–1, 1 turns MMR off; null restores the server default."
    )
    sessionsEnabled: bool | None = Field(
        None, description="Turn sessions on or off; null restores the server default."
    )
    proceduralEnabled: bool | None = Field(
        None, description="Turn skill-file promotion on or off; null restores the server default."
    )
    scope: ScopeIn = scope_field()


class MemorySettingsQuery(ScopeQuery):
    """The scope of GET memories/settings, validated like every scope (an empty projectId is a 422, not a
    500)."""


class ResolveIn(StrictIn):
    action: Literal["supersedes", "not_conflict", "restates", "revert"] = Field(
        description="supersedes: `memoryId` is current and `otherMemoryId` is replaced by it (it leaves "
        "retrieval unless includeSuperseded); not_conflict: both stand (undoes a supersession of the pair); "
        "restates: the two say the same (recorded; both stay); revert: undo the active decisions on the pair."
    )
    memoryId: Annotated[str, Trimmed(64)] = Field(description="The current memory (for supersedes).")
    otherMemoryId: Annotated[str, Trimmed(64)] = Field(description="The other memory of the pair.")
    note: Annotated[str, Trimmed(500)] | None = Field(None, description="Why, kept with the decision.")
    scope: ScopeIn = scope_field()


class DecisionOut(Schema):
    id: int = Field(description="Decision id.")
    newerMemoryId: str = Field(description="The current side of a supersedes decision; one side otherwise.")
    olderMemoryId: str = Field(description="The replaced side of a supersedes decision; the other otherwise.")
    decision: Literal["supersedes", "restates", "not_conflict"] = Field(description="What was decided.")
    origin: Literal["heuristic", "llm", "manual"] = Field(
        description="heuristic: the update detector; llm: a model; manual: a person or an agent's call."
    )
    rule: str | None = Field(None, description="The detector's signals, or the action a person chose.")
    model: str | None = Field(None, description="The model, when a model decided.")
    confidence: float = Field(description="0–1; 1 for people's decisions.")
    evidence: dict[str, Any] | None = Field(None, description="Cue, changed spans, explanation, note.")
    actor: str = Field(description="Who decided: user:<id>, system:update-detector or system:model.")
    createdAt: datetime = Field(description="When.")
    revertedAt: datetime | None = Field(None, description="When it was reverted; null while active.")
    revertedBy: str | None = Field(None, description="Who reverted it (or the decision that replaced it).")


class ResolveOut(Schema):
    decision: DecisionOut | None = Field(description="The decision recorded (null for revert).")
    reverted: list[DecisionOut] = Field(description="Decisions this call reverted.")
    memories: list[MemoryOut] = Field(description="Both memories as they are now.")


class DecisionsIn(StrictIn):
    memoryId: Annotated[str, Trimmed(64)] = Field(description="Decisions about this memory, newest first.")
    includeReverted: bool = Field(True, description="Also reverted decisions (the pair's history).")
    limit: int = Field(50, ge=1, le=200, description="At most this many, 1–200.")
    scope: ScopeIn = scope_field()


class DecisionsOut(Schema):
    decisions: list[DecisionOut] = Field(description="Newest first.")
