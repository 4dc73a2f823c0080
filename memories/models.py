"""Memories and the idempotency records of memories/add. Both hold workspace data: workspace_id + FORCE RLS."""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from tenancy.models import Workspace


class Memory(models.Model):
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
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)
    # search_tsv: a generated tsvector column (content, tags, category) added by migration 0002; read in raw SQL.

    class Meta:
        db_table = "memories"
        indexes = [
            models.Index(
                fields=["workspace", "-created_at", "-id"], name="memories_ws_recent",
                condition=Q(deleted_at__isnull=True),
            ),
            models.Index(
                fields=["workspace", "user_id", "layer", "-created_at"], name="memories_ws_user_layer",
                condition=Q(deleted_at__isnull=True),
            ),
            models.Index(fields=["workspace", "deleted_at"], name="memories_ws_deleted",
                         condition=Q(deleted_at__isnull=False)),
        ]


class IdempotencyRecord(models.Model):
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
