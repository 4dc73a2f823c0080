"""A JSON formatter for the stdlib's logging: one object per line, with a fixed set of context fields."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from config import tracing

# Only these attributes of a record are copied: an arbitrary `extra` could carry a body or a secret.
CONTEXT_FIELDS = (
    "request_id",
    "workspace_id",
    "key_prefix",
    "route",
    "method",
    "status",
    "duration_ms",
    "job_kind",
    "job_id",
)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat().replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in CONTEXT_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                payload[field] = value
        if tracing.ENABLED:
            trace_id = tracing.trace_id()
            if trace_id is not None:
                payload["trace_id"] = trace_id
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)
