"""Workspace import: one transaction in the target workspace, ids remapped, existing rows skipped.

Running the same file twice changes nothing the second time: a memory imported back into the workspace it came
from keeps its id while it is still there (and is skipped), any other gets an id derived from (target
workspace, source id), so no answer depends on whether an id is taken in another workspace; graph rows
are found again by their natural keys. Any bad line aborts the whole import (nothing half-imported). Every
reference in the file must point at a record of the same file, so a file cannot reach rows of another
workspace; row-level security backs that up.

A file is untrusted input, checked by the rules of the SDK API: memory lines by the same schema as
memories/add (memories.schemas.MemoryRecordIn), settings by the settings routes' schemas; what only the
server decides is decided again here (prompt-injection flags, canary behind the quality gate, the LLM budget
ceiling, which end user a fact's evidence belongs to).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar, cast, overload

from django.conf import settings
from django.db import connections, transaction
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ValidationError

from config.errors import ApiError
from config.schemas import (
    INT64_MAX,
    INT64_MIN,
    JSON_MAX_DEPTH,
    TIME_RANGE_MESSAGE,
    json_problem,
    text_problem,
)
from graphsvc.presence import graph_presence_forget
from graphsvc.schemas import DecayIn, ExtractionSettingsIn, GraphSettingsIn
from memories.sanitizer import DETECTOR_VERSION, memory_injection_flags, text_injection_flags
from memories.schemas import MemoryRecordIn, MemorySettingsPatchIn, embedding_models_allowed
from pipeline import jobs
from rollout.services import rollout_cache_clear, rollout_state_get
from tenancy.rls import workspace_context
from transfer.export import FORMAT, READABLE_VERSIONS, VERSION

_NAMESPACE = uuid.UUID("5b0f3c1e-8d1a-4f57-9a40-5d1b6f0e2c11")
_ROLES = {"self", "type", "scope", "subject", "category", "tag", "mentions"}
_EDGE_CLASSES = {"semantic", "temporal", "causal", "entity"}
_ORIGINS = {"mapping", "similarity", "llm_pairwise", "llm_semantic", "llm_entity", "manual", "consolidation"}
_KINDS = {
    "rollout",
    "retrieval_policy",
    "graph_settings",
    "memory_settings",
    "memory",
    "embedding",
    "community",
    "node",
    "alias",
    "edge",
    "fact_evidence",
    "link",
    "trailer",
}
Model = TypeVar("Model", bound=BaseModel)


class ImportFileError(ApiError):
    def __init__(self, line: int, message: str, *, field: str | None = None) -> None:
        details: dict[str, Any] = {"line": line}
        if field is not None:
            details["field"] = field
        super().__init__(
            422, "IMPORT_FILE_INVALID", f"Line {line}: {message} Nothing was imported.", details=details
        )


@dataclass
class ImportReport:
    created: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    embed_jobs_queued: int = 0
    # What the server decided differently from the file, one {line, field, code, message} each.
    adjusted: list[dict[str, Any]] = field(default_factory=list)

    def count(self, kind: str, created: bool) -> None:
        bucket = self.created if created else self.skipped
        bucket[kind] = bucket.get(kind, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "skipped": self.skipped,
            "embedJobsQueued": self.embed_jobs_queued,
            "adjusted": self.adjusted,
        }


@dataclass
class _State:
    workspace_id: int
    same_workspace: bool
    report: ImportReport
    memories: dict[str, uuid.UUID] = field(default_factory=dict)
    created_memories: dict[uuid.UUID, str | None] = field(default_factory=dict)  # new id → embedding model
    embedded: set[uuid.UUID] = field(default_factory=set)
    nodes: dict[int, int] = field(default_factory=dict)
    communities: dict[int, int] = field(default_factory=dict)
    edges: dict[int, int] = field(default_factory=dict)
    created_edges: set[int] = field(default_factory=set)
    supersessions: list[tuple[int, int]] = field(default_factory=list)  # (new edge id, source superseding id)
    # (new memory id, source id of the memory that superseded it in consolidation)
    memory_supersessions: list[tuple[uuid.UUID, str]] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)


# --- lines --------------------------------------------------------------------------------------------------


_TOO_BIG = INT64_MAX + 1


def _int64(text: str) -> int:
    # A number past 19 digits is out of range anyway: it stands in as one just past the range (json_problem
    # names its field), so a 100,000-digit number costs nothing and never meets Python's digit limit.
    return _TOO_BIG if len(text.lstrip("-")) > 19 else int(text)


def _parse(text: str, number: int) -> dict[str, Any]:
    try:
        # NaN, Infinity and 1e400 parse to floats that are not finite, which json_problem below refuses with
        # the field they are in.
        record = json.loads(text, parse_int=_int64)
    except RecursionError:
        raise ImportFileError(number, f"nests deeper than {JSON_MAX_DEPTH} levels.") from None
    except ValueError:
        raise ImportFileError(number, "not valid JSON; each line must be one JSON object.") from None
    if not isinstance(record, dict):
        raise ImportFileError(number, "each line must be a JSON object.")
    for key, value in record.items():
        problem = text_problem(key)
        if problem is not None:
            raise ImportFileError(number, f"a field name {problem}.")
        # Each field counts from its own value: a memory's metadata may nest as deep as memories/add allows.
        problem = json_problem(value, name=key, max_depth=JSON_MAX_DEPTH)
        if problem is not None:
            raise ImportFileError(number, f"{problem}.", field=key)
    return record


def _lines(source: Iterable[bytes | str]) -> Iterable[tuple[int, dict[str, Any]]]:
    max_lines, max_bytes = settings.EXPORT_IMPORT_MAX_LINES, settings.EXPORT_IMPORT_MAX_LINE_BYTES
    number = 0
    for raw in source:
        number += 1
        if number > max_lines + 2:  # header and trailer do not count
            raise ImportFileError(
                number, f"the file has more than {max_lines} records (EXPORT_IMPORT_MAX_LINES)."
            )
        if len(raw) > max_bytes:
            raise ImportFileError(
                number, f"the line is longer than {max_bytes} bytes (EXPORT_IMPORT_MAX_LINE_BYTES)."
            )
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ImportFileError(
                    number, f"not valid UTF-8 (byte {exc.start + 1} of the line); save the file as UTF-8."
                ) from None
        else:
            text = raw
        if not text.strip():
            continue
        yield number, _parse(text, number)


def _header_valid(header: dict[str, Any], line: int) -> None:
    if header.get("kind") != "header" or header.get("format") != FORMAT:
        raise ImportFileError(line, f"the first line must be the header of a {FORMAT} file.")
    if header.get("version") not in READABLE_VERSIONS:
        raise ImportFileError(
            line,
            f"version {repr(header.get('version'))[:40]} is not supported; this server reads versions "
            f"{', '.join(str(v) for v in sorted(READABLE_VERSIONS))}. Export again with this server's "
            f"version ({VERSION}).",
        )


def header_check(line: bytes | str) -> None:
    """The first line of an import file, checked as the import will check it (workspace/import refuses a
    file that is not an export before it queues a job)."""
    found = list(_lines([line]))
    if not found:
        raise ImportFileError(1, "the file is empty; expected a header line from workspace_export.")
    _header_valid(found[0][1], found[0][0])


# --- fields -------------------------------------------------------------------------------------------------


def _validated(
    model: type[Model], values: dict[str, Any], line: int, *, names: dict[str, str] | None = None
) -> Model:
    """`values` through an SDK schema; the first problem is the line's error, named by the file's field."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        parts = [str(part) for part in first.get("loc", ())]
        name = parts[0] if parts else ""
        name = (names or {}).get(name, name)
        where = ".".join([name, *parts[1:]]) if name else "record"
        message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        if first.get("type") == "extra_forbidden":
            message = "is not a field of this record; remove it"
        raise ImportFileError(line, f"'{where}' {message}.", field=name or None) from None


@overload
def _str(
    record: dict[str, Any], key: str, line: int, *, max_len: int, optional: Literal[False] = False
) -> str: ...
@overload
def _str(record: dict[str, Any], key: str, line: int, *, max_len: int, optional: bool) -> str | None: ...
def _str(record: dict[str, Any], key: str, line: int, *, max_len: int, optional: bool = False) -> str | None:
    value = record.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or (not optional and not value) or len(value) > max_len:
        raise ImportFileError(line, f"'{key}' must be a string of at most {max_len} characters.", field=key)
    return value


@overload
def _int(
    record: dict[str, Any], key: str, line: int, *, optional: Literal[False] = False, minimum: int = ...
) -> int: ...
@overload
def _int(
    record: dict[str, Any], key: str, line: int, *, optional: bool, minimum: int = ...
) -> int | None: ...
def _int(
    record: dict[str, Any], key: str, line: int, *, optional: bool = False, minimum: int = INT64_MIN
) -> int | None:
    value = record.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= INT64_MAX:
        low = "" if minimum == INT64_MIN else f" of at least {minimum}"
        raise ImportFileError(line, f"'{key}' must be an integer{low} within 64 bits.", field=key)
    return value


def _number(record: dict[str, Any], key: str, line: int, *, default: float, low: float, high: float) -> float:
    value = record.get(key)
    if value is None:
        return default
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise ImportFileError(line, f"'{key}' must be a finite number from {low:g} to {high:g}.", field=key)
    return float(value)


def _time(record: dict[str, Any], key: str, line: int) -> datetime | None:
    """An optional timestamp with its time zone, within what UTC holds (as the API's AwareInstant)."""
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 64:
        raise ImportFileError(line, f"'{key}' must be an ISO 8601 timestamp.", field=key)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ImportFileError(line, f"'{key}' must be an ISO 8601 timestamp.", field=key) from None
    if parsed.tzinfo is None:
        raise ImportFileError(line, f"'{key}' must carry a time zone.", field=key)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise ImportFileError(line, f"'{key}' {TIME_RANGE_MESSAGE}.", field=key) from None


def _choice(record: dict[str, Any], key: str, line: int, choices: set[str]) -> str:
    value = record.get(key)
    if value not in choices:
        raise ImportFileError(line, f"'{key}' must be one of {', '.join(sorted(choices))}.", field=key)
    return cast(str, value)


def _vector(record: dict[str, Any], key: str, line: int, dimension: int | None = None) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not value
        or len(value) > 16_000
        or not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in value)
    ):
        raise ImportFileError(line, f"'{key}' must be a non-empty list of finite numbers.", field=key)
    if dimension is not None and len(value) != dimension:
        raise ImportFileError(
            line, f"'{key}' has {len(value)} numbers but 'dimension' says {dimension}.", field=key
        )
    return "[" + ",".join(repr(float(x)) for x in value) + "]"


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, allow_nan=False)


def _allowed_model(record: dict[str, Any], key: str, line: int, *, optional: bool = False) -> str | None:
    """An embedding model this server allows (EMBEDDING_MODELS_ALLOWED), as memories/add requires: a file
    cannot store vectors of a model no request could name."""
    model = _str(record, key, line, max_len=160, optional=optional)
    allowed = embedding_models_allowed()
    if model is not None and model not in allowed:
        raise ImportFileError(
            line,
            f"'{key}' {model[:80]!r} is not an embedding model this server allows "
            f"(EMBEDDING_MODELS_ALLOWED: {', '.join(allowed)}); export without --embeddings, or allow it.",
            field=key,
        )
    return model


def _memory_ref(state: _State, record: dict[str, Any], key: str, line: int) -> uuid.UUID:
    source = record.get(key)
    mapped = state.memories.get(source) if isinstance(source, str) else None
    if mapped is None:
        raise ImportFileError(line, f"'{key}' names a memory that is not in this file.", field=key)
    return mapped


def _node_ref(state: _State, record: dict[str, Any], key: str, line: int) -> int:
    source = record.get(key)
    mapped = state.nodes.get(source) if isinstance(source, int) else None
    if mapped is None:
        raise ImportFileError(line, f"'{key}' names a graph node that is not in this file.", field=key)
    return mapped


def remap_edge_key(key: str, *, nodes: dict[int, int], memories: dict[str, uuid.UUID]) -> str:
    """Edge keys embed node ids (and for mapping edges a memory id); rebuild them with the new ids."""
    parts = key.split(":")
    try:
        if parts[0] == "m" and len(parts) >= 5:
            memory = memories.get(parts[1])
            if memory is None:
                return key
            return ":".join(
                ["m", str(memory), *parts[2:-2], str(nodes[int(parts[-2])]), str(nodes[int(parts[-1])])]
            )
        if parts[0] in ("r", "c") and len(parts) >= 4:  # relationship and consolidation edges
            return ":".join([*parts[:-2], str(nodes[int(parts[-2])]), str(nodes[int(parts[-1])])])
        if parts[0] == "f" and len(parts) >= 4:
            return ":".join(["f", str(nodes[int(parts[1])]), str(nodes[int(parts[2])]), *parts[3:]])
    except (KeyError, ValueError):
        return key
    return key


# --- the import ---------------------------------------------------------------------------------------------


def workspace_import(
    *,
    workspace_id: int,
    lines: Iterable[bytes | str],
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import an export file into `workspace_id`, all or nothing; returns what was created, skipped and
    adjusted. `progress` is told the number of each line read."""
    report = ImportReport()
    stream = iter(_lines(lines))
    first = next(stream, None)
    if first is None:
        raise ImportFileError(1, "the file is empty; expected a header line from workspace_export.")
    line, header = first
    _header_valid(header, line)
    state = _State(
        workspace_id=workspace_id,
        same_workspace=header.get("sourceWorkspaceId") == workspace_id,
        report=report,
    )
    trailer: dict[str, Any] | None = None
    with workspace_context(workspace_id), connections["app"].cursor() as cursor:
        for line, record in stream:
            if progress is not None:
                progress(line)
            if trailer is not None:
                raise ImportFileError(line, "a line follows the trailer.")
            kind = record.get("kind")
            if kind not in _KINDS:
                raise ImportFileError(line, f"unknown record kind {str(kind)[:40]!r}.", field="kind")
            if kind == "trailer":
                trailer = record
                continue
            state.seen[kind] = state.seen.get(kind, 0) + 1
            created = _IMPORTERS[kind](cursor, state, record, line)
            report.count(kind, created)
        if trailer is None:
            raise ImportFileError(
                line, "the file ends without its trailer line: it was cut short. Export it again."
            )
        if trailer.get("counts") != state.seen:
            raise ImportFileError(
                line, f"the trailer counts {trailer.get('counts')} but the file holds {state.seen}."
            )
        _finish(cursor, state)
        missing = [mid for mid, model in state.created_memories.items() if mid not in state.embedded]
        for model in {state.created_memories[mid] for mid in missing}:
            group = [mid for mid in missing if state.created_memories[mid] == model]
            report.embed_jobs_queued += len(
                jobs.jobs_enqueue(
                    workspace_id=workspace_id, memory_ids=group, kind=jobs.Kind.EMBED, model=model
                )
            )
        transaction.on_commit(lambda: rollout_cache_clear(workspace_id), using="app")
        transaction.on_commit(lambda: graph_presence_forget(workspace_id=workspace_id), using="app")
    return report


def _finish(cursor: Any, state: _State) -> None:
    for edge_id, source_superseding in state.supersessions:
        target = state.edges.get(source_superseding)
        if target is not None:
            cursor.execute("UPDATE graph_edges SET superseded_by_id = %s WHERE id = %s", [target, edge_id])
    for memory_id, source_winner in state.memory_supersessions:
        winner = state.memories.get(source_winner)
        if winner is not None:
            cursor.execute(
                "UPDATE memories SET superseded_by = %s WHERE id = %s AND workspace_id = %s",
                [winner, memory_id, state.workspace_id],
            )
    if state.created_edges:
        # Files written before fact evidence was exported: a fact's recorded source becomes its evidence, with
        # that memory's end user, as when evidence was first introduced.
        cursor.execute(
            """
            INSERT INTO graph_fact_evidence (workspace_id, edge_id, memory_id, user_id, evidence_text,
                                             created_at)
            SELECT e.workspace_id, e.id, e.evidence_memory_id, m.user_id, e.evidence_text, e.created_at
            FROM graph_edges e
            JOIN memories m ON m.workspace_id = e.workspace_id AND m.id = e.evidence_memory_id
            WHERE e.workspace_id = %s AND e.id = ANY(%s) AND e.origin = 'llm_entity'
              AND NOT EXISTS (SELECT 1 FROM graph_fact_evidence fe
                              WHERE fe.workspace_id = e.workspace_id AND fe.edge_id = e.id)
            ON CONFLICT DO NOTHING
            """,
            [state.workspace_id, sorted(state.created_edges)],
        )


# --- settings -----------------------------------------------------------------------------------------------


def _setting_insert(cursor: Any, state: _State, table: str, values: dict[str, Any]) -> bool:
    names = ", ".join(values)
    cursor.execute(
        f"INSERT INTO {table} (workspace_id, {names}, updated_at) "
        f"VALUES (%s, {', '.join(['%s'] * len(values))}, now()) ON CONFLICT (workspace_id) DO NOTHING",
        [state.workspace_id, *values.values()],
    )
    return bool(cursor.rowcount == 1)


def _bool(record: dict[str, Any], key: str, line: int) -> bool:
    value = record.get(key)
    if not isinstance(value, bool):
        raise ImportFileError(line, f"'{key}' must be true or false.", field=key)
    return value


def _import_rollout(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    mode = _choice(record, "mode", line, {"off", "shadow", "canary"})
    if mode == "canary":
        # Canary is this workspace's quality gate's decision, never the file's: only once the gate has judged
        # enough of this workspace's own traffic (pass or warn) and does not block it.
        gate = rollout_state_get(workspace_id=state.workspace_id)
        if gate.canary_blocked or gate.gate_status not in ("pass", "warn"):
            mode = "shadow"
            state.report.adjusted.append(
                {
                    "line": line,
                    "field": "mode",
                    "code": "ROLLOUT_CANARY_GATED",
                    "message": f"canary became shadow: this workspace's quality gate does not let canary "
                    f"through (status {gate.gate_status}). Switch with graph/rollout once the gate passes.",
                }
            )
    return _setting_insert(
        cursor,
        state,
        "rollout_configs",
        {"mode": mode, "autopilot_enabled": _bool(record, "autopilotEnabled", line)},
    )


def _import_retrieval_policy(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    return _setting_insert(
        cursor,
        state,
        "retrieval_policies",
        {
            "default_strategy": _choice(record, "defaultStrategy", line, {"lexical", "hybrid"}),
            "default_autopilot_enabled": _bool(record, "autopilotEnabled", line),
            "ready_window_streak": 0,
        },
    )


def _import_graph_settings(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    budget = record.get("llmDailyTokenBudget")
    _validated(
        ExtractionSettingsIn,
        {"dailyTokenBudget": budget},
        line,
        names={"dailyTokenBudget": "llmDailyTokenBudget"},
    )
    ceiling = settings.GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX
    if ceiling and budget is not None and budget > ceiling:
        raise ImportFileError(
            line,
            f"'llmDailyTokenBudget' may be at most {ceiling:,} tokens on this server "
            "(GRAPH_LLM_DAILY_TOKEN_BUDGET_MAX); lower it in the file or remove it.",
            field="llmDailyTokenBudget",
        )
    graph = _validated(
        GraphSettingsIn,
        {
            "recallStrategy": record.get("recallStrategy"),
            "decayRate": record.get("decayRate"),
            "maxEntities": record.get("maxEntities"),
        },
        line,
    )
    rates = record.get("decayRates") or {}
    if not isinstance(rates, dict) or len(rates) > 200:
        raise ImportFileError(
            line, "'decayRates' must be an object of at most 200 entries.", field="decayRates"
        )
    for relation, rate in rates.items():
        _validated(
            DecayIn,
            {"action": "set_rate", "edgeType": relation, "rate": rate},
            line,
            names={"edgeType": "decayRates", "rate": "decayRates"},
        )
    return _setting_insert(
        cursor,
        state,
        "graph_settings",
        {
            "llm_daily_token_budget": budget,
            "recall_strategy": graph.recallStrategy or "bfs",
            "decay_rate": graph.decayRate,
            "decay_rates": Jsonb({key: float(value) for key, value in rates.items() if value is not None}),
            "max_entities": graph.maxEntities,
        },
    )


def _import_memory_settings(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    flags = {
        key: _bool(record, key, line) for key in ("redactCredentials", "scrubAtRest", "admissionEnabled")
    }
    checked = _validated(
        MemorySettingsPatchIn,
        {
            **flags,
            "admissionThreshold": record.get("admissionThreshold"),
            "importanceWeight": record.get("importanceWeight"),
            "halfLifeDays": record.get("halfLifeDays"),
            "mmrLambda": record.get("mmrLambda"),
        },
        line,
    )
    return _setting_insert(
        cursor,
        state,
        "memory_settings",
        {
            "redact_credentials": flags["redactCredentials"],
            "scrub_at_rest": flags["scrubAtRest"],
            "admission_enabled": flags["admissionEnabled"],
            "admission_threshold": checked.admissionThreshold,
            "importance_weight": checked.importanceWeight,
            "half_life_days": checked.halfLifeDays,
            "mmr_lambda": checked.mmrLambda,
        },
    )


# --- memories -----------------------------------------------------------------------------------------------


def _import_memory(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    memory = _validated(MemoryRecordIn, {k: v for k, v in record.items() if k != "kind"}, line)
    source = str(memory.id)
    if source in state.memories:
        raise ImportFileError(line, f"memory {source} appears twice.", field="id")
    new_id = uuid.uuid5(_NAMESPACE, f"{state.workspace_id}:{source}")
    if state.same_workspace:
        # Back in the workspace it came from, a memory still there keeps its id (the second run skips it).
        # Whether an id is taken anywhere else must never show: the id a memory gets, the answer and the
        # error cannot depend on it, so every other memory gets the id derived from this workspace.
        cursor.execute(
            "SELECT 1 FROM memories WHERE id = %s AND workspace_id = %s", [memory.id, state.workspace_id]
        )
        if cursor.fetchone() is not None:
            new_id = memory.id
    cursor.execute(
        """
        INSERT INTO memories (id, workspace_id, content, type, layer, scope, project_id, user_id, tags, paths,
                              category, metadata, embedding_model, injection_flags, injection_scan_version,
                              expires_at, created_at, updated_at, deleted_at, importance)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (id) DO NOTHING
        """,
        [
            new_id,
            state.workspace_id,
            memory.content,
            memory.type,
            memory.layer,
            memory.scope,
            memory.projectId,
            memory.userId,
            memory.tags,
            memory.paths,
            memory.category,
            _json(memory.metadata),
            memory.embeddingModel,
            # Found again here, as memories/add finds them: a file's flags are not trusted either way.
            memory_injection_flags(
                content=memory.content,
                tags=memory.tags,
                paths=memory.paths,
                category=memory.category,
                metadata=memory.metadata,
            ),
            DETECTOR_VERSION,
            memory.expiresAt,
            memory.createdAt,
            memory.updatedAt or memory.createdAt,
            memory.deletedAt,
            memory.importance,
        ],
    )
    created = cursor.rowcount == 1
    if not created:
        # Taken: by this workspace (a second run), or — for a derived id, only by a hash collision — by no
        # row this workspace can see.
        cursor.execute(
            "SELECT 1 FROM memories WHERE id = %s AND workspace_id = %s", [new_id, state.workspace_id]
        )
        if cursor.fetchone() is None:
            raise ImportFileError(line, f"memory {source} could not be given an id; nothing was changed.")
    else:
        if memory.supersededBy is not None:
            state.memory_supersessions.append((new_id, str(memory.supersededBy)))
        state.created_memories[new_id] = memory.embeddingModel if memory.deletedAt is None else None
        if memory.deletedAt is not None:
            state.embedded.add(new_id)  # a forgotten memory needs no embedding
    state.memories[source] = new_id
    return created


def _import_embedding(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    memory_id = _memory_ref(state, record, "memoryId", line)
    dimension = _int(record, "dimension", line, minimum=1)
    vector = _vector(record, "vector", line, dimension)
    if vector is None:
        raise ImportFileError(line, "'vector' is required.", field="vector")
    model = _allowed_model(record, "model", line)
    cursor.execute(
        """
        INSERT INTO memory_embeddings (workspace_id, memory_id, model, dimension, embedding, content_sha256,
                                       user_id, scope, project_id, expires_at, created_at, updated_at)
        SELECT workspace_id, id, %s, %s, %s::vector, %s, user_id, scope, project_id, expires_at, now(), now()
        FROM memories WHERE id = %s AND workspace_id = %s
        ON CONFLICT (memory_id, model) DO NOTHING
        """,
        [
            model,
            dimension,
            vector,
            _str(record, "contentSha256", line, max_len=64),
            memory_id,
            state.workspace_id,
        ],
    )
    state.embedded.add(memory_id)
    return bool(cursor.rowcount == 1)


# --- the graph ----------------------------------------------------------------------------------------------


def _graph_text(
    state: _State, record: dict[str, Any], key: str, line: int, *, max_len: int = 100_000
) -> str | None:
    """An optional text of the graph (a fact sentence, a summary, evidence) as the file gives it, or None
    when it trips the prompt-injection detector: graph text is pasted into prompts unmarked, and what the
    server extracts never comes from a flagged memory, so a file's must not either. The row is kept without
    the text (upkeep writes summaries again) and the report says so."""
    text = _str(record, key, line, max_len=max_len, optional=True)
    flags = text_injection_flags(text)
    if not flags:
        return text
    state.report.adjusted.append(
        {
            "line": line,
            "field": key,
            "code": "PROMPT_INJECTION_DROPPED",
            "message": f"'{key}' was not imported: it reads as a prompt injection ({', '.join(flags)}).",
        }
    )
    return None


def _graph_name(record: dict[str, Any], key: str, line: int, *, max_len: int) -> str:
    """A name of the graph (an entity's label, a community's name): refused when it trips the
    prompt-injection detector, since a row cannot be kept without its name."""
    name = _str(record, key, line, max_len=max_len)
    flags = text_injection_flags(name)
    if flags:
        raise ImportFileError(
            line, f"'{key}' reads as a prompt injection ({', '.join(flags)}); rename it.", field=key
        )
    return name


def _import_community(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    source = _int(record, "id", line)
    _unique(state.communities, source, "community", line)
    members = record.get("memberNodeIds") or []
    if (
        not isinstance(members, list)
        or not all(isinstance(m, int) for m in members)
        or len(members) > 100_000
    ):
        raise ImportFileError(line, "'memberNodeIds' must be a list of node ids.", field="memberNodeIds")
    name = _graph_name(record, "name", line, max_len=300)
    # The members' mean vector, with the model it was computed in: one without the other matches nothing.
    centroid = _vector(record, "centroid", line)
    centroid_model = _allowed_model(record, "centroidModel", line, optional=True)
    if (centroid is None) != (centroid_model is None):
        raise ImportFileError(line, "'centroid' and 'centroidModel' go together.", field="centroidModel")
    cursor.execute(
        """
        INSERT INTO graph_communities (workspace_id, name, summary, fingerprint, centroid, centroid_model,
                                       created_at, updated_at)
        VALUES (%s, %s, %s, %s, %s::vector, %s, now(), now())
        ON CONFLICT (workspace_id, name) DO NOTHING RETURNING id
        """,
        [
            state.workspace_id,
            name,
            _graph_text(state, record, "summary", line) or "",
            _str(record, "fingerprint", line, max_len=64),
            centroid,
            centroid_model,
        ],
    )
    row = cursor.fetchone()
    if row is None:
        cursor.execute(
            "SELECT id FROM graph_communities WHERE workspace_id = %s AND name = %s",
            [state.workspace_id, name],
        )
        state.communities[source] = cursor.fetchone()[0]
        return False
    state.communities[source] = row[0]
    return True


def _unique(seen: dict[int, int], source: int, what: str, line: int) -> None:
    # A second line with the same id would silently re-point every later reference to it.
    if source in seen:
        raise ImportFileError(line, f"{what} id {source} appears twice.", field="id")


def _import_node(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    source = _int(record, "id", line)
    _unique(state.nodes, source, "node", line)
    node_type = _str(record, "nodeType", line, max_len=32)
    key = _str(record, "nodeKey", line, max_len=600)
    if node_type == "memory":
        key = str(_memory_ref(state, {"nodeKey": key}, "nodeKey", line))
    community_source = _int(record, "communityId", line, optional=True)
    community = state.communities.get(community_source) if community_source is not None else None
    if community_source is not None and community is None:
        raise ImportFileError(
            line, "'communityId' names a community that is not in this file.", field="communityId"
        )
    metadata = record.get("metadata")  # any JSON value, as the producers store it (checked by _parse)
    mention_count = _int(record, "mentionCount", line, optional=True, minimum=0) or 0
    # An entity's confidence (None on the memory graph's nodes, and in files written before it was exported).
    confidence = (
        None
        if record.get("confidence") is None
        else _number(record, "confidence", line, default=1.0, low=0.0, high=1.0)
    )
    cursor.execute(
        """
        INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, metadata, summary, embedding,
                                 embedding_model, first_seen_at, last_seen_at, mention_count, confidence,
                                 created_at, updated_at)
        VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s::vector, %s, %s, %s, %s, %s, now(), now())
        ON CONFLICT (workspace_id, node_type, node_key) DO NOTHING RETURNING id
        """,
        [
            state.workspace_id,
            node_type,
            key,
            _graph_name(record, "label", line, max_len=300),
            _json(metadata),
            _graph_text(state, record, "summary", line),
            _vector(record, "embedding", line),
            _allowed_model(record, "embeddingModel", line, optional=True),
            _time(record, "firstSeenAt", line),
            _time(record, "lastSeenAt", line),
            mention_count,
            confidence,
        ],
    )
    row = cursor.fetchone()
    if row is None:
        cursor.execute(
            "SELECT id FROM graph_nodes WHERE workspace_id = %s AND node_type = %s AND node_key = %s",
            [state.workspace_id, node_type, key],
        )
        state.nodes[source] = cursor.fetchone()[0]
        return False
    state.nodes[source] = row[0]
    if community is not None:
        # Membership is a row of its own; an entity that was already here keeps its community.
        cursor.execute(
            "INSERT INTO graph_community_members (workspace_id, node_id, community_id) VALUES (%s, %s, %s)",
            [state.workspace_id, row[0], community],
        )
    return True


def _import_alias(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    node_id = _node_ref(state, record, "nodeId", line)
    _str(record, "alias", line, max_len=600)  # present and a string, or the file is refused
    alias = _graph_text(state, record, "alias", line, max_len=600)
    if alias is None:
        return False  # an alias is only its text: none is kept
    cursor.execute(
        "INSERT INTO graph_entity_aliases (workspace_id, node_id, alias, created_at) "
        "VALUES (%s, %s, %s, now()) ON CONFLICT DO NOTHING",
        [state.workspace_id, node_id, alias],
    )
    return bool(cursor.rowcount == 1)


def _import_edge(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    source = _int(record, "id", line)
    _unique(state.edges, source, "edge", line)
    from_node, to_node = (
        _node_ref(state, record, "fromNodeId", line),
        _node_ref(state, record, "toNodeId", line),
    )
    key = remap_edge_key(
        _str(record, "edgeKey", line, max_len=200), nodes=state.nodes, memories=state.memories
    )
    evidence = record.get("evidenceMemoryId")
    evidence_id = state.memories.get(evidence) if isinstance(evidence, str) else None
    expired_at = _time(record, "expiredAt", line)
    # Finite, or every read that ranks or draws the edge would carry NaN into its answer.
    weight = _number(record, "weight", line, default=1.0, low=-1e6, high=1e6)
    confidence = _number(record, "confidence", line, default=1.0, low=0.0, high=1.0)
    metadata = record.get("metadata")
    if expired_at is not None:
        # Invalidated facts are history, outside the unique key: one with the same key and end is the same
        # row.
        cursor.execute(
            "SELECT id FROM graph_edges WHERE workspace_id = %s AND edge_key = %s AND expired_at = %s",
            [state.workspace_id, key, expired_at],
        )
        row = cursor.fetchone()
        if row is not None:
            state.edges[source] = row[0]
            return False
    cursor.execute(
        """
        INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class,
                                 weight, confidence, fact, evidence_memory_id, evidence_text, origin,
                                 valid_from, valid_to, created_at, updated_at, expired_at, expires_at,
                                 last_observed_at, retrieval_count, metadata)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, coalesce(%s, now()), now(), %s, %s,
                %s, 0, %s::jsonb)
        ON CONFLICT (workspace_id, edge_key) WHERE expired_at IS NULL DO NOTHING RETURNING id
        """,
        [
            state.workspace_id,
            key,
            from_node,
            to_node,
            _str(record, "edgeType", line, max_len=128),
            _choice(record, "edgeClass", line, _EDGE_CLASSES),
            weight,
            confidence,
            _graph_text(state, record, "fact", line),
            evidence_id,
            _graph_text(state, record, "evidenceText", line),
            _choice(record, "origin", line, _ORIGINS),
            _time(record, "validFrom", line),
            _time(record, "validTo", line),
            _time(record, "createdAt", line),
            expired_at,
            _time(record, "expiresAt", line),
            _time(record, "lastObservedAt", line),
            _json(metadata),
        ],
    )
    row = cursor.fetchone()
    if row is None:
        cursor.execute(
            "SELECT id FROM graph_edges WHERE workspace_id = %s AND edge_key = %s AND expired_at IS NULL",
            [state.workspace_id, key],
        )
        state.edges[source] = cursor.fetchone()[0]
        return False
    state.edges[source] = row[0]
    state.created_edges.add(row[0])
    superseding = _int(record, "supersededById", line, optional=True)
    if superseding is not None:
        state.supersessions.append((row[0], superseding))
    return True


def _import_fact_evidence(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    source_edge = _int(record, "edgeId", line)
    edge_id = state.edges.get(source_edge)
    if edge_id is None:
        raise ImportFileError(line, "'edgeId' names a fact that is not in this file.", field="edgeId")
    memory_id = _memory_ref(state, record, "memoryId", line)
    # The end user comes from the imported memory, never from the file: it decides who may see the fact.
    cursor.execute(
        """
        INSERT INTO graph_fact_evidence (workspace_id, edge_id, memory_id, user_id, evidence_text, created_at)
        SELECT m.workspace_id, %s, m.id, m.user_id, %s, coalesce(%s, now())
        FROM memories m WHERE m.workspace_id = %s AND m.id = %s
        ON CONFLICT (workspace_id, edge_id, memory_id) DO NOTHING
        """,
        [
            edge_id,
            _graph_text(state, record, "evidenceText", line),
            _time(record, "createdAt", line),
            state.workspace_id,
            memory_id,
        ],
    )
    return bool(cursor.rowcount == 1)


def _import_link(cursor: Any, state: _State, record: dict[str, Any], line: int) -> bool:
    cursor.execute(
        "INSERT INTO memory_node_links (workspace_id, memory_id, node_id, role, created_at) "
        "VALUES (%s, %s, %s, %s, now()) ON CONFLICT DO NOTHING",
        [
            state.workspace_id,
            _memory_ref(state, record, "memoryId", line),
            _node_ref(state, record, "nodeId", line),
            _choice(record, "role", line, _ROLES),
        ],
    )
    return bool(cursor.rowcount == 1)


_IMPORTERS: dict[str, Callable[[Any, _State, dict[str, Any], int], bool]] = {
    "rollout": _import_rollout,
    "retrieval_policy": _import_retrieval_policy,
    "graph_settings": _import_graph_settings,
    "memory_settings": _import_memory_settings,
    "memory": _import_memory,
    "embedding": _import_embedding,
    "community": _import_community,
    "node": _import_node,
    "alias": _import_alias,
    "edge": _import_edge,
    "fact_evidence": _import_fact_evidence,
    "link": _import_link,
}
