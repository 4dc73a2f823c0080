"""Memories and the idempotency records of memories/add. Both hold workspace data: workspace_id +
FORCE RLS."""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from pgvector.django import VectorField

from tenancy.models import Workspace, WorkspaceRow


class Memory(WorkspaceRow):
    class Type(models.TextChoices):
        RULE = "rule"
        DECISION = "decision"
        FACT = "fact"
        NOTE = "note"
        SKILL = "skill"

    class Layer(models.TextChoices):
        RULE = "rule"
        WORKING = "working"
        LONG_TERM = "long_term"

    class Scope(models.TextChoices):
        GLOBAL = "global"
        PROJECT = "project"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    content = models.TextField()
    type = models.CharField(max_length=16, choices=Type.choices, default=Type.NOTE)
    layer = models.CharField(max_length=16, choices=Layer.choices, default=Layer.LONG_TERM)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.GLOBAL)
    project_id = models.CharField(max_length=240, null=True, blank=True)
    user_id = models.CharField(max_length=120, null=True, blank=True)
    tags = ArrayField(models.TextField(), default=list, blank=True)
    paths = ArrayField(models.TextField(), default=list, blank=True)
    category = models.CharField(max_length=120, null=True, blank=True)
    metadata = models.JSONField(null=True, blank=True)
    embedding_model = models.CharField(max_length=160, null=True, blank=True)
    # Prompt-injection patterns found at write time (memories.sanitizer); flagged memories skip LLM
    # extraction.
    injection_flags = ArrayField(models.CharField(max_length=40), default=list, blank=True)
    # The detector that found them (memories.sanitizer.DETECTOR_VERSION; 0: before versions were kept, content
    # only). stored_rows_repair scans memories of an older detector again.
    injection_scan_version = models.PositiveSmallIntegerField(default=0, db_default=0)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Write-time importance in [0, 1] (memories.hygiene.importance_score), blended into ranking.
    importance = models.FloatField(default=0.5)
    # Set by consolidation: the newer memory of the same upsert key that replaces this one. Superseded
    # memories stay stored but leave retrieval unless a read asks for them (MemoryScope.include_superseded).
    superseded_by = models.UUIDField(null=True, blank=True)
    # A conversation turn (sessions/checkpoint, sessions/turns) or a session's summary: the session it belongs
    # to. A turn also has its index in the session, its role, who said it and when (which may be long before
    # it was stored). Every other memory leaves these null, and ranking's conversation rules (neighbour and
    # reply lifts, speaker boost, question damping) apply only to turns.
    session_id = models.UUIDField(null=True, blank=True)
    turn_kind = models.CharField(max_length=16, null=True, blank=True)
    turn_index = models.IntegerField(null=True, blank=True)
    turn_role = models.CharField(max_length=16, null=True, blank=True)
    speaker = models.CharField(max_length=120, null=True, blank=True)
    said_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)
    # search_tsv: a generated tsvector column (content, tags, category) added by migration 0002; read in raw
    # SQL.

    class Meta:
        db_table = "memories"
        indexes = [
            models.Index(
                fields=["workspace", "-created_at", "-id"],
                name="memories_ws_recent",
                condition=Q(deleted_at__isnull=True),
            ),
            models.Index(
                fields=["workspace", "user_id", "layer", "-created_at"],
                name="memories_ws_user_layer",
                condition=Q(deleted_at__isnull=True),
            ),
            models.Index(
                fields=["workspace", "deleted_at"],
                name="memories_ws_deleted",
                condition=Q(deleted_at__isnull=False),
            ),
            # A session's turns in order: the transcript, and the neighbours the ranking lifts.
            models.Index(
                fields=["workspace", "session_id", "turn_index"],
                name="memories_ws_session_turns",
                condition=Q(session_id__isnull=False, deleted_at__isnull=True),
            ),
            # Turns by when they were said: a question's time window finds the turns said in it.
            models.Index(
                fields=["workspace", "-said_at"],
                name="memories_ws_said_at",
                condition=Q(said_at__isnull=False, deleted_at__isnull=True),
            ),
            # What the returned memories superseded (context/get's conflicts): few rows, read on every call.
            models.Index(
                fields=["workspace", "superseded_by"],
                name="memories_ws_superseded_by",
                condition=Q(superseded_by__isnull=False),
            ),
        ]

    @property
    def is_turn(self) -> bool:
        """A conversation turn: linked to its session and placed in it (a session summary is not a turn)."""
        return self.session_id is not None and self.turn_index is not None


class IdempotencyRecord(WorkspaceRow):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    user_id = models.BigIntegerField()
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    response_status = models.SmallIntegerField(null=True)
    response_data = models.JSONField(null=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "idempotency_records"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user_id", "key"], name="idempotency_records_unique")
        ]


class MemoryEmbedding(WorkspaceRow):
    """One vector per (memory, model), with the scope columns copied so vector search filters inside the
    index."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    # The database's foreign key is (workspace_id, memory_id) -> memories (tenancy.citus_sql).
    memory = models.ForeignKey(
        Memory, on_delete=models.CASCADE, db_index=False, db_constraint=False, related_name="embeddings"
    )
    model = models.CharField(max_length=160)
    dimension = models.IntegerField()
    embedding = VectorField()
    content_sha256 = models.CharField(max_length=64)
    user_id = models.CharField(max_length=120, null=True, blank=True)
    scope = models.CharField(max_length=8)
    project_id = models.CharField(max_length=240, null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "memory_embeddings"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "memory", "model"], name="memory_embeddings_unique")
        ]
        indexes = [
            models.Index(fields=["workspace", "model", "dimension"], name="memory_embeddings_ws_model")
        ]


class PipelineJob(WorkspaceRow):
    """Status of one pipeline step for one memory; what `pipeline` in the memory JSON and graph/status
    show."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    memory = models.ForeignKey(
        Memory, on_delete=models.CASCADE, db_index=False, db_constraint=False, related_name="jobs"
    )
    kind = models.CharField(max_length=16)
    status = models.CharField(max_length=16)
    attempts = models.IntegerField(default=0)
    model = models.CharField(max_length=160, null=True, blank=True)
    last_error_code = models.CharField(max_length=64, null=True, blank=True)
    last_error_message = models.CharField(max_length=500, null=True, blank=True)
    claim_token = models.UUIDField(null=True, blank=True)
    run_after = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "pipeline_jobs"
        constraints = [
            models.UniqueConstraint(fields=["workspace", "memory", "kind"], name="pipeline_jobs_unique")
        ]
        indexes = [
            models.Index(fields=["workspace", "status", "run_after"], name="pipeline_jobs_ws_status"),
        ]


class PipelineError(WorkspaceRow):
    """Failures worth showing in graph/status recentErrors (mapping failures never reach a job row)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    memory_id = models.UUIDField(null=True, blank=True)
    stage = models.CharField(max_length=32)
    code = models.CharField(max_length=64)
    message = models.CharField(max_length=500)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "pipeline_errors"
        indexes = [models.Index(fields=["workspace", "-created_at"], name="pipeline_errors_recent")]


class MemorySettings(WorkspaceRow):
    """Per-workspace memory hygiene settings; a missing row means the defaults in config.settings."""

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, related_name="+")
    redact_credentials = models.BooleanField(default=True)
    scrub_at_rest = models.BooleanField(default=False)
    admission_enabled = models.BooleanField(default=False)
    admission_threshold = models.FloatField(null=True, blank=True)
    importance_weight = models.FloatField(null=True, blank=True)
    # Temporal decay and MMR diversity of memories/search and context/get; null = the server defaults
    # (SEARCH_HALF_LIFE_DAYS, SEARCH_MMR_LAMBDA). 0 days turns decay off, λ 1 turns MMR off.
    half_life_days = models.FloatField(null=True, blank=True)
    mmr_lambda = models.FloatField(null=True, blank=True)
    # Sessions (sessions/*) and skill-file promotion (skills/files/promote); null = the server defaults
    # (MEMORY_SESSION_ENABLED, MEMORY_PROCEDURAL_ENABLED).
    sessions_enabled = models.BooleanField(null=True, blank=True)
    procedural_enabled = models.BooleanField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "memory_settings"


class AdmissionCount(WorkspaceRow):
    """How many memories/add calls admission control admitted or rejected, per reason: one counter row
    each."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    admitted = models.BooleanField()
    reason = models.CharField(max_length=32)
    count = models.BigIntegerField(default=0)
    last_at = models.DateTimeField()

    class Meta:
        db_table = "admission_counts"
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "admitted", "reason"], name="admission_counts_unique"
            )
        ]


class ConsolidationRun(WorkspaceRow):
    """One memories/consolidate run (not dry runs) with its counts."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    user_id = models.CharField(max_length=120, null=True, blank=True)
    project_id = models.CharField(max_length=240, null=True, blank=True)
    input_count = models.IntegerField()
    merged_count = models.IntegerField()
    superseded_count = models.IntegerField()
    conflicted_count = models.IntegerField()
    model = models.CharField(max_length=160, null=True, blank=True)
    metadata = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "consolidation_runs"
        indexes = [models.Index(fields=["workspace", "-created_at"], name="consolidation_runs_recent")]


class MemorySession(WorkspaceRow):
    """A conversation or an agent's working session (sessions/start … sessions/end). Its turns are memories
    (Memory.session_id); its owner is the userId / projectId it was started with."""

    class Status(models.TextChoices):
        ACTIVE = "active"
        CLOSED = "closed"
        COMPACTED = "compacted"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    scope = models.CharField(max_length=8, default=Memory.Scope.GLOBAL)
    project_id = models.CharField(max_length=240, null=True, blank=True)
    user_id = models.CharField(max_length=120, null=True, blank=True)
    client = models.CharField(max_length=120, null=True, blank=True)
    title = models.CharField(max_length=240, null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    metadata = models.JSONField(null=True, blank=True)
    turn_count = models.IntegerField(default=0)
    token_count = models.BigIntegerField(default=0)
    # The index the next turn gets when its caller gives none (one past the highest stored).
    next_turn_index = models.IntegerField(default=0)
    summary_memory_id = models.UUIDField(null=True, blank=True)
    started_at = models.DateTimeField()
    last_activity_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memory_sessions"
        indexes = [models.Index(fields=["workspace", "-last_activity_at"], name="memory_sessions_recent")]


class SessionSnapshot(WorkspaceRow):
    """A session's Markdown transcript as it stood at one moment (sessions/{id}/snapshot, sessions/end): what
    skills/files/promote turns into a procedure."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    # The database's foreign key is (workspace_id, session_id) -> memory_sessions (tenancy.citus_sql).
    session = models.ForeignKey(
        MemorySession, on_delete=models.CASCADE, db_index=False, db_constraint=False, related_name="+"
    )
    slug = models.CharField(max_length=160)
    source_trigger = models.CharField(max_length=32)
    transcript_md = models.TextField()
    message_count = models.IntegerField()
    # The session's turn count and last activity when it was taken: a later snapshot request with both
    # unchanged answers this one instead of writing another.
    last_activity_at = models.DateTimeField()
    created_at = models.DateTimeField()

    class Meta:
        db_table = "session_snapshots"
        indexes = [
            models.Index(fields=["workspace", "session", "-created_at"], name="session_snapshots_recent")
        ]


class SkillFile(WorkspaceRow):
    """A file of instructions an agent loads (a procedure, a playbook), addressed by its path within its
    owner's userId / projectId. context/get returns the ones matching its query."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    scope = models.CharField(max_length=8, default=Memory.Scope.GLOBAL)
    project_id = models.CharField(max_length=240, null=True, blank=True)
    user_id = models.CharField(max_length=120, null=True, blank=True)
    path = models.CharField(max_length=400)
    content = models.TextField()
    procedure_key = models.CharField(max_length=120, null=True, blank=True)
    source_session_id = models.UUIDField(null=True, blank=True)
    source_snapshot_id = models.UUIDField(null=True, blank=True)
    usage_count = models.IntegerField(default=0)
    last_used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "skill_files"
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "user_id", "project_id", "path"],
                name="skill_files_owner_path",
                nulls_distinct=False,
            )
        ]


class SupersessionDecision(WorkspaceRow):
    """One decision about which of two memories is current: `newer` supersedes `older`, or they restate each
    other, or they are not in conflict. Who decided (a rule of the update detector, a model, a person through
    the API, MCP or the dashboard) and when; reverting a decision keeps its row (reverted_at, reverted_by), so
    the history of a pair is its rows in order."""

    class Decision(models.TextChoices):
        SUPERSEDES = "supersedes"
        RESTATES = "restates"
        NOT_CONFLICT = "not_conflict"

    class Origin(models.TextChoices):
        HEURISTIC = "heuristic"
        LLM = "llm"
        MANUAL = "manual"

    id = models.BigAutoField(primary_key=True)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    # For not_conflict the two are a pair without a direction (stored newer first all the same).
    newer_id = models.UUIDField()
    older_id = models.UUIDField()
    decision = models.CharField(max_length=16, choices=Decision.choices)
    origin = models.CharField(max_length=16, choices=Origin.choices)
    # The detector's signals ("cue:moved+left:friday"), or what a person chose ("keep_newer", "merge").
    rule = models.CharField(max_length=200, null=True, blank=True)
    model = models.CharField(max_length=160, null=True, blank=True)
    confidence = models.FloatField(default=1.0)
    evidence = models.JSONField(null=True, blank=True)
    actor = models.CharField(max_length=200)
    created_at = models.DateTimeField()
    reverted_at = models.DateTimeField(null=True, blank=True)
    reverted_by = models.CharField(max_length=200, null=True, blank=True)

    class Meta:
        db_table = "memory_supersessions"
        indexes = [
            models.Index(fields=["workspace", "older_id"], name="memory_supersessions_older"),
            models.Index(fields=["workspace", "newer_id"], name="memory_supersessions_newer"),
            models.Index(fields=["workspace", "-created_at"], name="memory_supersessions_recent"),
        ]
