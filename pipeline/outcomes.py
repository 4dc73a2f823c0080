"""What a memory write answers, shared by the SDK routes and the MCP tools."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from memories import selectors
from memories.schemas import AddOut
from pipeline.services import AddOutcome


def embedding_model_choice(requested: str | None) -> dict[str, str]:
    if requested:
        return {"embeddingModel": requested, "embeddingModelSource": "request"}
    return {"embeddingModel": settings.EMBEDDING_MODEL, "embeddingModelSource": "workspace_default"}


def add_outcome_data(*, workspace_id: int, outcome: AddOutcome) -> tuple[int, dict[str, Any]]:
    """HTTP status and AddOut data of an add: 201 stored, or 200 with the existing memory admission kept
    instead (shared by the SDK API and the MCP tool)."""
    memory = outcome.memory
    if outcome.admitted:
        message, status = "Memory stored.", 201
        memory_out = selectors.memory_payload(memory, pipeline=selectors.just_queued_pipeline())
    else:
        reason = outcome.admission.reason if outcome.admission else "NOT_ADMITTED"
        message, status = f"Not stored ({reason}): memory {memory.id} already says this.", 200
        memory_out = selectors.memory_payloads(workspace_id=workspace_id, memories=[memory])[0]
    data = AddOut.model_validate(
        {
            "id": str(memory.id),
            "message": message,
            "memory": memory_out,
            "admitted": outcome.admitted,
            "admission": outcome.admission.payload() if outcome.admission else None,
            **embedding_model_choice(memory.embedding_model),
        }
    ).model_dump(mode="json")
    return status, data
