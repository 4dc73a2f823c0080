"""Small helpers shared by the tests (the personas and SdkClient come from tests/conftest.py)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from memories.models import Memory
from pipeline import services as pipeline
from tenancy import services
from tenancy.rls import workspace_context

# Routing mode auto sends a github.com/acme/* projectId to org acme for its members (alice, bob), and to the
# caller's personal workspace for anyone else (charlie).
ACME_PROJECT = "github.com/acme/x"
ACME_SCOPE = {"projectId": ACME_PROJECT}


def ids(memories: list[dict[str, Any]]) -> list[str]:
    return [memory["id"] for memory in memories]


def personal_workspace_id(user: AbstractBaseUser) -> int:
    return services.personal_workspace_ensure(user=user).id


def stored(workspace_id: int, memory_id: str) -> Memory | None:
    """The row as stored, soft-deleted or not (a query outside a workspace context sees nothing)."""
    with workspace_context(workspace_id):
        return Memory.objects.filter(pk=memory_id).first()


def memory_row(workspace_id: int, memory_id: str) -> Memory:
    """The row of a memory that must exist (raises otherwise)."""
    with workspace_context(workspace_id):
        return Memory.objects.get(pk=memory_id)


def run_jobs(workspace_id: int, **kwargs: Any) -> int:
    """Run the workspace's pending pipeline jobs in this process, as a worker would; returns how many ran."""
    return pipeline.jobs_run_pending(workspace_id=workspace_id, **kwargs)


def stored_count(workspace_id: int, **filters: Any) -> int:
    with workspace_context(workspace_id):
        return Memory.objects.filter(workspace_id=workspace_id, **filters).count()


def backdate(workspace_id: int, memory_id: str, *, days: float) -> None:
    with workspace_context(workspace_id):
        Memory.objects.filter(pk=memory_id).update(created_at=timezone.now() - timedelta(days=days))


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def assert_about(value: str | None, expected: datetime, *, seconds: float = 60) -> None:
    assert value is not None
    assert abs((parse_time(value) - expected).total_seconds()) < seconds, (value, expected)


def add_org_global(personas: Any, content: str, **fields: Any) -> dict[str, Any]:
    """A global (project-less) memory in org acme: bob writes it with acme as his active org for one call."""
    services.active_org_set(user=personas.bob, org=personas.acme)
    try:
        return personas.bob_api.add(content, **fields)
    finally:
        services.active_org_set(user=personas.bob, org=None)


def session_start(api: Any, **body: Any) -> str:
    """A new session (sessions/start) of `api`'s caller; its id."""
    return api.ok("sessions/start", body, status=201)["sessionId"]


def turn(api: Any, session_id: str, content: str, **fields: Any) -> dict[str, Any]:
    """One turn recorded with sessions/checkpoint; the turn's memory as the API answers it."""
    body = {"sessionId": session_id, "content": content, **fields}
    return api.ok("sessions/checkpoint", body, status=201)["event"]["memory"]
