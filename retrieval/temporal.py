"""Time in retrieval: when a memory happened, for temporal decay and time windows.

A memory happened at its `metadata.sessionTime` when it carries one (what a chat agent records when it stores
the turns of a conversation held earlier, or an import of old notes: the server sets createdAt to the moment
of the write), else at its createdAt."""

from __future__ import annotations

from datetime import UTC, datetime

from memories.models import Memory

SESSION_TIME_KEY = "sessionTime"
# An ISO 8601 time is at most ~35 characters; anything longer is not one and is not parsed.
MAX_TIME_TEXT = 40


def memory_time(memory: Memory) -> datetime:
    """metadata.sessionTime (ISO 8601; without a time zone, UTC) when present and valid, else createdAt."""
    metadata = memory.metadata
    if isinstance(metadata, dict):
        raw = metadata.get(SESSION_TIME_KEY)
        if isinstance(raw, str) and len(raw) <= MAX_TIME_TEXT:
            moment = _parse_time(raw)
            if moment is not None:
                return moment
    return memory.created_at


def _parse_time(raw: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
