"""Background jobs: work too long for a web request (workspace import and export, and any later kind), run by
a django-q2 worker while the caller polls jobs/status. Holds workspace data: workspace_id + FORCE RLS."""

from __future__ import annotations

import uuid

from django.db import models

from tenancy.models import Workspace, WorkspaceRow


class BackgroundJob(WorkspaceRow):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    # A random id: a job id names only a job of the caller's workspace, and guessing one reveals nothing.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, db_index=False, related_name="+")
    kind = models.CharField(max_length=32)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # What the job is doing now (e.g. "memories", "writing"), set by the job with its progress.
    phase = models.CharField(max_length=32, blank=True, default="")
    done = models.BigIntegerField(default=0)
    total = models.BigIntegerField(null=True, blank=True)
    # The kind's input (a file name, options): ids and small values only, never file contents.
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    # A failure shows its stable code and class (validation_error, internal_error, …); the exception's own
    # text stays in the server log. error_details holds only what Cairn itself wrote for the caller (the line
    # and field of a refused import record).
    error_code = models.CharField(max_length=64, null=True, blank=True)
    error_class = models.CharField(max_length=64, null=True, blank=True)
    error_details = models.JSONField(null=True, blank=True)
    attempts = models.SmallIntegerField(default=0)
    created_by = models.CharField(max_length=120, blank=True, default="")
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "background_jobs"
        indexes = [models.Index(fields=["workspace", "-created_at"], name="background_jobs_recent")]

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED)
