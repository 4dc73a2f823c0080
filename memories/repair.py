"""Repairs of stored rows that break today's write rules, so every read can serve them again.

Rows written before the rules (by an import that trusted its file, an older server, a hand edit): timestamps
outside what Python's datetime holds in UTC (a read that loads one fails), memory metadata deeper than
JSON_MAX_DEPTH or not an object, numbers that are not finite, and graph metadata an export/import round
trip wrapped in JSON strings. Plain SQL on a cursor the caller opened in the workspace's RLS context, no
models: the repair migration (memories.0010) runs it with the owner's connection, `manage.py
stored_rows_repair` with the runtime one.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime
from typing import Any

from config.schemas import JSON_MAX_DEPTH

logger = logging.getLogger("cairn.memories")

LOW, HIGH = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
# A JSON string holding JSON, unwrapped at most this many times (each buggy round trip added one).
MAX_UNWRAP = 50
_TIME_COLUMNS = ("created_at", "updated_at", "expires_at", "deleted_at")
_TOO_DEEP = f'$.**{{{JSON_MAX_DEPTH}}} ? (@.type() == "object" || @.type() == "array")'


def _cut(value: Any, depth: int) -> Any:
    if isinstance(value, dict | list):
        if depth > JSON_MAX_DEPTH:
            return None
        if isinstance(value, dict):
            return {key: _cut(child, depth + 1) for key, child in value.items()}
        return [_cut(child, depth + 1) for child in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_cut(value: Any) -> Any:
    """Any JSON value cut to what the write rules allow: containers below JSON_MAX_DEPTH and numbers that are
    not finite become null."""
    return _cut(value, 1)


def _metadata_cut(text: str) -> str | None:
    """Deep metadata as JSON text, cut below JSON_MAX_DEPTH; None when it does not even parse."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return json.dumps(_cut(value, 1), allow_nan=False) if isinstance(value, dict) else None


def _unwrapped(text: str) -> str | None:
    """JSON text a JSON string held (repeatedly), or None when it held plain text."""
    value: Any = text
    for _ in range(MAX_UNWRAP):
        if not isinstance(value, str) or not value.lstrip().startswith(("{", "[")):
            break
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    if isinstance(value, str):
        return None
    return json.dumps(_cut(value, 1), allow_nan=False)


# Memories scanned again per statement by injection_flags_rescan.
RESCAN_BATCH = 1_000


def injection_flags_rescan(cursor: Any, *, workspace_id: int, limit: int | None = None) -> int:
    """Scan again the memories whose injection flags an older detector found (injection_scan_version under
    sanitizer.DETECTOR_VERSION): a flag today's detector raises then keeps the memory out of extraction and
    marks it untrusted in every text, however old it is. Deleted memories too (a restore brings them back).
    At most `limit` memories (None: all of them); returns how many changed flags."""
    from memories.sanitizer import DETECTOR_VERSION, memory_injection_flags

    changed = scanned = 0
    after = None
    while limit is None or scanned < limit:
        batch = RESCAN_BATCH if limit is None else min(RESCAN_BATCH, limit - scanned)
        cursor.execute(
            "SELECT id, content, tags, paths, category, metadata::text, injection_flags FROM memories "
            "WHERE workspace_id = %s AND injection_scan_version < %s AND (%s::uuid IS NULL OR id > %s) "
            "ORDER BY id LIMIT %s",
            [workspace_id, DETECTOR_VERSION, after, after, batch],
        )
        rows = cursor.fetchall()
        if not rows:
            break
        for memory_id, content, tags, paths, category, metadata, stored in rows:
            flags = memory_injection_flags(
                content=content,
                tags=tags,
                paths=paths,
                category=category,
                metadata=json.loads(metadata) if metadata else None,
            )
            cursor.execute(
                "UPDATE memories SET injection_flags = %s, injection_scan_version = %s "
                "WHERE workspace_id = %s AND id = %s",
                [flags, DETECTOR_VERSION, workspace_id, memory_id],
            )
            if sorted(flags) != sorted(stored or []):
                changed += 1
                logger.info(
                    "memory %s: injection flags %s → %s (detector %s)",
                    memory_id,
                    stored,
                    flags,
                    DETECTOR_VERSION,
                )
        scanned += len(rows)
        after = rows[-1][0]
    return changed


def stored_rows_repair(cursor: Any, *, workspace_id: int, rescan: bool = True) -> dict[str, int]:
    """Repair the workspace's rows in place; returns how many of each kind changed. Call inside the
    workspace's RLS context (app.workspace_id set). `rescan`: also scan again the injection flags of
    memories an older detector scanned (injection_flags_rescan); the migration that predates the detector
    version column runs without it."""
    repaired: dict[str, int] = {}
    if rescan:
        repaired["memories.injection_flags"] = injection_flags_rescan(cursor, workspace_id=workspace_id)
    ws = {"ws": workspace_id, "low": LOW, "high": HIGH}
    for column in _TIME_COLUMNS:
        # Clamped into the range: an imported time of 0001-01-01T00:00+05:00 becomes 0001-01-01T00:00Z.
        cursor.execute(
            f"UPDATE memories SET {column} = least(greatest({column}, %(low)s), %(high)s) "
            f"WHERE workspace_id = %(ws)s AND ({column} < %(low)s OR {column} > %(high)s)",
            ws,
        )
        repaired[f"memories.{column}"] = cursor.rowcount
    cursor.execute(
        "UPDATE memories SET importance = 0.5 "
        "WHERE workspace_id = %(ws)s AND NOT (importance BETWEEN -1e308 AND 1e308)",
        ws,
    )
    repaired["memories.importance"] = cursor.rowcount
    cursor.execute(
        "UPDATE memories SET metadata = NULL WHERE workspace_id = %(ws)s AND metadata IS NOT NULL "
        "AND jsonb_typeof(metadata) NOT IN ('object', 'null')",
        ws,
    )
    repaired["memories.metadata"] = cursor.rowcount
    cursor.execute(
        "SELECT id, metadata::text FROM memories "
        "WHERE workspace_id = %(ws)s AND metadata @? %(deep)s::jsonpath",
        {**ws, "deep": _TOO_DEEP},
    )
    for memory_id, text in cursor.fetchall():
        cursor.execute(
            "UPDATE memories SET metadata = %s::jsonb WHERE workspace_id = %s AND id = %s",
            [_metadata_cut(text), workspace_id, memory_id],
        )
        logger.warning("memory %s: metadata deeper than %s levels cut", memory_id, JSON_MAX_DEPTH)
        repaired["memories.metadata"] += 1
    for column in ("weight", "confidence"):
        cursor.execute(
            f"UPDATE graph_edges SET {column} = 0 "
            f"WHERE workspace_id = %(ws)s AND NOT ({column} BETWEEN -1e308 AND 1e308)",
            ws,
        )
        repaired[f"graph_edges.{column}"] = cursor.rowcount
    for table in ("graph_nodes", "graph_edges"):
        cursor.execute(
            f"SELECT id, metadata #>> '{{}}' FROM {table} "
            "WHERE workspace_id = %(ws)s AND jsonb_typeof(metadata) = 'string'",
            ws,
        )
        count = 0
        for row_id, text in cursor.fetchall():
            unwrapped = _unwrapped(text)
            if unwrapped is None:
                continue
            cursor.execute(
                f"UPDATE {table} SET metadata = %s::jsonb WHERE workspace_id = %s AND id = %s",
                [unwrapped, workspace_id, row_id],
            )
            count += 1
        repaired[f"{table}.metadata"] = count
    return {kind: count for kind, count in repaired.items() if count}
