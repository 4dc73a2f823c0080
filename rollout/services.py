"""Writes and decisions of the rollout: the state context/get runs on, one metric per retrieval, the mode, the
two autopilots (mode and default strategy), and the metrics purge.

context/get calls, in this order and inside its workspace_context:
    rollout_state_get(workspace_id=…)          cached per process for ROLLOUT_STATE_CACHE_SECONDS
    retrieval_metric_record(workspace_id=…, …)  one INSERT
    retrieval_policy_evaluate(workspace_id=…)   a dictionary lookup, except once per policy window
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from config.errors import ApiError
from config.prepared import prepared_cursor
from ops import metrics as ops_metrics
from rollout import selectors
from rollout.evaluation import (
    QualityGate,
    default_on_blockers,
    quality_gate_evaluate,
    rollout_alarms,
    rollout_plan_build,
    shadow_metrics_payload,
)
from rollout.models import RetrievalMetric, RetrievalPolicy, RolloutConfig
from tenancy.models import Workspace
from tenancy.rls import current_workspace_id, workspace_context

logger = logging.getLogger("cairn.rollout")

AUTOPILOT = "autopilot"
PURGE_SCHEDULE_NAME = "rollout-metrics-purge"
PURGE_TASK = "rollout.tasks.retrieval_metrics_purge"


def _now() -> datetime:
    """The clock of every decision here; tests move it to cross policy windows."""
    return timezone.now()


# --- the state context/get runs on --------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutState:
    mode: str  # off | shadow | canary
    canary_blocked: bool
    gate_status: str  # pass | warn | fail | insufficient_data | unavailable
    gate_reason_codes: list[str]
    default_strategy: str  # lexical | hybrid
    ready_for_default_on: bool
    blocker_codes: list[str]


@dataclass(frozen=True)
class _Evaluation:
    settings: selectors.RolloutSettings
    gate: QualityGate

    def state(self) -> RolloutState:
        blockers = default_on_blockers(self.gate)
        return RolloutState(
            mode=self.settings.mode,
            canary_blocked=self.gate.canary_blocked,
            gate_status=self.gate.status,
            gate_reason_codes=self.gate.reason_codes,
            default_strategy=self.settings.default_strategy,
            ready_for_default_on=not blockers,
            blocker_codes=blockers,
        )


# workspace id → (monotonic expiry, state). Per process: another process sees a change within the TTL.
_state_cache: dict[int, tuple[float, RolloutState]] = {}
# workspace id → (start of the policy window this process last saw evaluated, whether a due rollback was
# checked in it). The second part stops a rollback the workspace's autopilot setting forbids from being
# re-checked per call.
_policy_windows: dict[int, tuple[datetime, bool]] = {}
_cache_lock = threading.Lock()


def rollout_cache_clear(workspace_id: int | None = None) -> None:
    """Forget cached states and evaluated windows: of one workspace, or of all (tests, after direct row
    edits)."""
    with _cache_lock:
        if workspace_id is None:
            _state_cache.clear()
            _policy_windows.clear()
        else:
            _state_cache.pop(workspace_id, None)
            _policy_windows.pop(workspace_id, None)


def _evaluate(*, workspace_id: int, now: datetime, window_hours: int | None = None) -> _Evaluation:
    """Settings and gate from two queries. A database error degrades to defaults with the gate 'unavailable'
    (canary blocked), inside a savepoint so the caller's transaction stays usable."""
    hours = window_hours or settings.ROLLOUT_GATE_WINDOW_HOURS
    try:
        with workspace_context(workspace_id), transaction.atomic(using="app"):
            rollout_settings = selectors.rollout_settings_get(workspace_id=workspace_id)
            current, previous = selectors.metrics_windows(
                workspace_id=workspace_id, now=now, window_hours=hours
            )
    except DatabaseError:
        logger.exception("rollout state unavailable for workspace %s", workspace_id)
        return _Evaluation(
            selectors.RolloutSettings.defaults(),
            QualityGate.unavailable(now=now, window_hours=hours),
        )
    gate = quality_gate_evaluate(current=current, previous=previous, window_hours=hours, evaluated_at=now)
    return _Evaluation(rollout_settings, gate)


def rollout_state_get(*, workspace_id: int) -> RolloutState:
    """Mode, gate and default strategy for one retrieval; re-aggregated at most once per TTL per process."""
    ttl = settings.ROLLOUT_STATE_CACHE_SECONDS
    cached = _state_cache.get(workspace_id)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    state = _evaluate(workspace_id=workspace_id, now=_now()).state()
    if ttl > 0:
        with _cache_lock:
            _state_cache[workspace_id] = (time.monotonic() + ttl, state)
    return state


# --- metrics ------------------------------------------------------------------------------------------------


def retrieval_metric_record(
    *,
    workspace_id: int,
    mode: str,
    requested_strategy: str,
    applied_strategy: str,
    shadow_executed: bool,
    baseline_candidates: int,
    graph_candidates: int,
    graph_expanded_count: int,
    total_candidates: int,
    fallback_triggered: bool,
    fallback_reason: str | None,
    project_id: str | None,
    user_id: str | None,
    semantic_model: str | None,
    duration_ms: float,
    endpoint: str,
) -> None:
    """One INSERT, one round trip. Old rows go in the hourly purge, not here: a DELETE per retrieval would
    cost every request.

    Inside the caller's workspace_context (context/get) the row joins the retrieval's own transaction without
    a savepoint: it commits with it, before the answer is sent, so an answered retrieval always has its row; a
    failed INSERT fails the call rather than losing the row. Outside one, it opens its own."""
    values = retrieval_metric_values(
        workspace_id=workspace_id,
        mode=mode,
        requested_strategy=requested_strategy,
        applied_strategy=applied_strategy,
        shadow_executed=shadow_executed,
        baseline_candidates=baseline_candidates,
        graph_candidates=graph_candidates,
        graph_expanded_count=graph_expanded_count,
        total_candidates=total_candidates,
        fallback_triggered=fallback_triggered,
        fallback_reason=fallback_reason,
        project_id=project_id,
        user_id=user_id,
        semantic_model=semantic_model,
        duration_ms=duration_ms,
        endpoint=endpoint,
    )
    if current_workspace_id() == workspace_id:
        sql, params = retrieval_metric_statement(values)
        with prepared_cursor() as cursor:
            cursor.execute(sql, params)
    else:
        with workspace_context(workspace_id):
            _metric_insert(values)
    retrieval_metric_counted(values)


def retrieval_metric_values(
    *,
    workspace_id: int,
    mode: str,
    requested_strategy: str,
    applied_strategy: str,
    shadow_executed: bool,
    baseline_candidates: int,
    graph_candidates: int,
    graph_expanded_count: int,
    total_candidates: int,
    fallback_triggered: bool,
    fallback_reason: str | None,
    project_id: str | None,
    user_id: str | None,
    semantic_model: str | None,
    duration_ms: float,
    endpoint: str,
) -> dict[str, Any]:
    """The retrieval_metrics row of one retrieval, column → value."""
    return {
        "workspace_id": workspace_id,
        "created_at": _now(),
        "mode": mode,
        "requested_strategy": requested_strategy,
        "applied_strategy": applied_strategy,
        "shadow_executed": shadow_executed,
        "baseline_candidates": max(0, baseline_candidates),
        "graph_candidates": max(0, graph_candidates),
        "graph_expanded_count": max(0, graph_expanded_count),
        "total_candidates": max(0, total_candidates),
        "fallback_triggered": fallback_triggered,
        "fallback_reason": fallback_reason,
        "project_id": project_id,
        "user_id": user_id,
        "semantic_model": semantic_model,
        "duration_ms": max(0.0, float(duration_ms)),
        "endpoint": endpoint,
    }


def retrieval_metric_statement(values: dict[str, Any]) -> tuple[str, list[Any]]:
    """The INSERT of a metric row inside the caller's workspace transaction, as SQL with positional values,
    for a caller that sends it as part of a statement of its own (context/get: with its conflicts lookup, one
    round trip for both; a data-modifying CTE runs once whether or not its rows are read). Call
    retrieval_metric_counted once the row is written."""
    sql = _metric_insert_sql(tuple(values), not settings.RETRIEVAL_METRIC_SYNC_COMMIT)
    return sql, list(values.values())


def retrieval_metric_counted(values: dict[str, Any]) -> None:
    """The Prometheus counter of a recorded retrieval."""
    ops_metrics.RETRIEVALS.labels(
        endpoint=values["endpoint"],
        requested=values["requested_strategy"],
        applied=values["applied_strategy"],
        fallback_reason=values["fallback_reason"] or "none",
    ).inc()


_METRIC_INSERT_SQL = "INSERT INTO {table} ({columns}) VALUES ({values})"
_TYPE_LENGTH = re.compile(r"\(\d+\)$")
# The same row, and in the same round trip the transaction's commit stops waiting for the WAL flush: a
# read-only retrieval otherwise pays a disk flush for its metric alone (RETRIEVAL_METRIC_SYNC_COMMIT).
# Still INSERT … VALUES, with the setting in one value that is not workspace_id (Citus routes a VALUES row by
# its workspace_id, which must stay a plain value): an INSERT … SELECT would be copied in on Citus, which
# row-level security refuses.
_METRIC_INSERT_RELAXED_SQL = "INSERT INTO {table} ({columns}) VALUES ({values})"
_RELAXED = "CASE WHEN set_config('synchronous_commit', 'off', true) IS NOT NULL THEN {value} END"


def _metric_insert(values: dict[str, Any], *, relaxed_commit: bool = False) -> None:
    """A plain INSERT: the ORM's create would build a model instance and ask for the new id back. Prepared
    (its plan never changes; planning was half of its PostgreSQL time), so each value carries its column's
    type: a NULL bound on the server would otherwise be taken for text. The type without its length (varchar,
    not varchar(16)): a cast would cut a long value silently, where the column rejects it."""
    with prepared_cursor() as cursor:
        cursor.execute(_metric_insert_sql(tuple(values), relaxed_commit), list(values.values()))


@functools.cache
def _metric_insert_sql(columns: tuple[str, ...], relaxed_commit: bool) -> str:
    # The same few column lists on every call: the typed statement text is built once per process.
    connection = connections["app"]
    # Every metric column is a concrete field, so its db_type is never None.
    db_types = [cast(str, RetrievalMetric._meta.get_field(name).db_type(connection)) for name in columns]
    typed = [f"%s::{_TYPE_LENGTH.sub('', db_type)}" for db_type in db_types]
    if relaxed_commit:
        at = next(i for i, name in enumerate(columns) if name not in {"workspace", "workspace_id"})
        typed[at] = _RELAXED.format(value=typed[at])
    template = _METRIC_INSERT_RELAXED_SQL if relaxed_commit else _METRIC_INSERT_SQL
    return template.format(
        table=RetrievalMetric._meta.db_table, columns=", ".join(columns), values=", ".join(typed)
    )


def retrieval_metrics_purge(*, older_than_days: int | None = None) -> int:
    """Delete metrics older than the retention, workspace by workspace (RLS admits one workspace per
    transaction)."""
    days = settings.ROLLOUT_METRICS_RETENTION_DAYS if older_than_days is None else older_than_days
    cutoff = _now() - timedelta(days=days)
    deleted = 0
    for workspace_id in Workspace.objects.order_by("id").values_list("id", flat=True).iterator():
        with workspace_context(workspace_id):
            count, _ = RetrievalMetric.objects.filter(
                workspace_id=workspace_id, created_at__lt=cutoff
            ).delete()
        deleted += count
    return deleted


def metrics_purge_schedule_ensure(*, using: str = "default") -> None:
    """Make sure the worker runs the purge hourly: one django-q Schedule row, created once, on the migrated
    alias."""
    from django_q.models import Schedule

    if Schedule._meta.db_table not in connections[using].introspection.table_names():
        return  # django_q not migrated yet; the next migrate creates it
    existing = Schedule.objects.using(using).filter(name=PURGE_SCHEDULE_NAME).order_by("id")
    first = existing.first()
    if first is None:
        # First run an hour out: a fresh database has nothing to purge, and test workers stay free for their
        # jobs.
        Schedule.objects.using(using).create(
            name=PURGE_SCHEDULE_NAME,
            func=PURGE_TASK,
            schedule_type=Schedule.HOURLY,
            repeats=-1,
            next_run=timezone.now() + timedelta(hours=1),
        )
        return
    if first.func != PURGE_TASK or first.schedule_type != Schedule.HOURLY or first.repeats != -1:
        first.func, first.schedule_type, first.repeats = PURGE_TASK, Schedule.HOURLY, -1
        first.save(using=using, update_fields=["func", "schedule_type", "repeats"])
    existing.exclude(pk=first.pk).delete()


# --- mode ---------------------------------------------------------------------------------------------------


def canary_blocked_error(gate: QualityGate) -> ApiError:
    codes = gate.blocking_codes
    return ApiError(
        409,
        "CANARY_ROLLOUT_BLOCKED",
        "The retrieval quality gate blocks canary"
        + (f" ({', '.join(codes)})" if codes else f" (status {gate.status})")
        + ". Stay in shadow, fix the cause, and retry once the gate passes.",
        details={"reasonCodes": codes, "qualityStatus": gate.status, "windowHours": gate.window_hours},
    )


def rollout_mode_set(
    *,
    workspace_id: int,
    mode: str | None,
    autopilot_enabled: bool | None,
    updated_by: str,
    enforce_gate: bool = True,
) -> None:
    """A change by a workspace admin. Canary is refused (409) while the gate blocks it, judged fresh, never
    from the cache. `enforce_gate=False` is for the operator only (the development demo starts in canary
    before any traffic exists for the gate to judge)."""
    now = _now()
    with workspace_context(workspace_id):
        if mode == RolloutConfig.Mode.CANARY and enforce_gate:
            gate = _evaluate(workspace_id=workspace_id, now=now).gate
            if gate.canary_blocked:
                raise canary_blocked_error(gate)
        # Insert-or-nothing, then lock: two first changes at once must not collide on the primary key.
        RolloutConfig.objects.bulk_create(
            [RolloutConfig(workspace_id=workspace_id, mode=settings.ROLLOUT_DEFAULT_MODE, updated_at=now)],
            ignore_conflicts=True,
        )
        config = RolloutConfig.objects.select_for_update().get(workspace_id=workspace_id)
        if mode is not None:
            config.mode = mode
        if autopilot_enabled is not None:
            config.autopilot_enabled = autopilot_enabled
        config.updated_at, config.updated_by = now, updated_by
        config.save()
        # Again after commit: a request in this process may re-cache the old state between now and the commit.
        transaction.on_commit(lambda: rollout_cache_clear(workspace_id), using="app")
    rollout_cache_clear(workspace_id)


def _mode_autopilot_apply(*, workspace_id: int, evaluation: _Evaluation, now: datetime) -> bool:
    """Write the plan's recommendedMode when the workspace enabled the mode autopilot. True if the mode
    changed."""
    if not evaluation.settings.autopilot_enabled:
        return False
    plan = rollout_plan_build(evaluated_at=now, mode=evaluation.settings.mode, gate=evaluation.gate)
    if plan.recommended_mode == evaluation.settings.mode:
        return False
    with workspace_context(workspace_id):
        # The row exists (only rollout_mode_set turns the autopilot on). Conditional on the mode that was read
        # and the autopilot still being on: a concurrent operator change wins over the autopilot.
        changed = RolloutConfig.objects.filter(
            workspace_id=workspace_id, mode=evaluation.settings.mode, autopilot_enabled=True
        ).update(mode=plan.recommended_mode, updated_at=now, updated_by=AUTOPILOT)
    if changed:
        logger.info(
            "rollout autopilot moved workspace %s from %s to %s",
            workspace_id,
            evaluation.settings.mode,
            plan.recommended_mode,
        )
        rollout_cache_clear(workspace_id)
    return bool(changed)


def rollout_autopilot_apply(*, workspace_id: int) -> bool:
    """The mode autopilot on demand (GET graph/rollout), on the configured gate window."""
    now = _now()
    return _mode_autopilot_apply(
        workspace_id=workspace_id, evaluation=_evaluate(workspace_id=workspace_id, now=now), now=now
    )


# --- default-strategy autopilot -----------------------------------------------------------------------------


def policy_window_start(moment: datetime) -> datetime:
    """Windows are aligned to the epoch, so every process agrees on which window a moment falls in."""
    size = settings.ROLLOUT_POLICY_WINDOW_MINUTES * 60
    return datetime.fromtimestamp(int(moment.timestamp()) // size * size, tz=moment.tzinfo)


def retrieval_policy_evaluate(*, workspace_id: int) -> None:
    """The default-strategy autopilot, once per policy window rather than once per request.

    A ready window advances the streak; after ROLLOUT_PROMOTE_AFTER_READY_WINDOWS consecutive ready windows
    the default becomes hybrid. A window that is not ready resets the streak and rolls a hybrid default back
    to lexical at once: between windows, the cached state is checked on every call so a rollback never waits
    for the next window. With the workspace's default autopilot off, only the streak and decision are kept.
    The mode autopilot rides along once per window. Best effort: a failure is logged and never fails the
    retrieval.
    """
    now = _now()
    window = policy_window_start(now)
    state = rollout_state_get(workspace_id=workspace_id)
    rollback_due = (
        state.default_strategy == RetrievalPolicy.Strategy.HYBRID and not state.ready_for_default_on
    )
    seen = _policy_windows.get(workspace_id)
    if seen is not None and seen[0] == window and (seen[1] or not rollback_due):
        return
    try:
        with workspace_context(workspace_id), transaction.atomic(using="app"):
            changed = _policy_evaluate_locked(workspace_id=workspace_id, now=now, window=window)
    except DatabaseError:
        logger.exception("retrieval policy evaluation failed for workspace %s", workspace_id)
        return
    with _cache_lock:
        _policy_windows[workspace_id] = (window, rollback_due)
        if changed:
            _state_cache.pop(workspace_id, None)


def _policy_evaluate_locked(*, workspace_id: int, now: datetime, window: datetime) -> bool:
    """Returns whether the default strategy or the mode changed."""
    RetrievalPolicy.objects.bulk_create(
        [RetrievalPolicy(workspace_id=workspace_id, updated_at=now)], ignore_conflicts=True
    )
    # The row lock serialises processes that cross into a new window together: one advances the streak.
    policy = RetrievalPolicy.objects.select_for_update().get(workspace_id=workspace_id)
    evaluation = _evaluate(workspace_id=workspace_id, now=now)
    ready = not default_on_blockers(evaluation.gate)
    hybrid, lexical = RetrievalPolicy.Strategy.HYBRID, RetrievalPolicy.Strategy.LEXICAL
    strategy_before = policy.default_strategy

    if policy.last_window_start is not None and policy.last_window_start >= window:
        # Already evaluated in this window (maybe by another process): only the immediate rollback may still
        # apply.
        if policy.default_strategy == hybrid and not ready and policy.default_autopilot_enabled:
            policy.default_strategy, policy.ready_window_streak = lexical, 0
            policy.last_decision = "rollback_lexical_default"
            policy.last_evaluated_at, policy.updated_at, policy.updated_by = now, now, AUTOPILOT
            policy.save()
        return policy.default_strategy != strategy_before

    policy.ready_window_streak = policy.ready_window_streak + 1 if ready else 0
    promote = ready and policy.ready_window_streak >= settings.ROLLOUT_PROMOTE_AFTER_READY_WINDOWS
    if policy.default_strategy == lexical:
        policy.last_decision = "promote_hybrid_default" if promote else "hold_lexical_default"
        if promote and policy.default_autopilot_enabled:
            policy.default_strategy = hybrid
    else:
        policy.last_decision = "keep_hybrid_default" if ready else "rollback_lexical_default"
        if not ready and policy.default_autopilot_enabled:
            policy.default_strategy = lexical
    policy.last_evaluated_at, policy.last_window_start = now, window
    if policy.default_strategy != strategy_before:
        policy.updated_at, policy.updated_by = now, AUTOPILOT
    policy.save()
    mode_changed = _mode_autopilot_apply(workspace_id=workspace_id, evaluation=evaluation, now=now)
    return mode_changed or policy.default_strategy != strategy_before


# --- the overview graph/status and graph/rollout show -------------------------------------------------------


def rollout_overview(
    *, workspace_id: int, window_hours: int | None = None, autopilot_applied: bool = False
) -> dict[str, Any]:
    """rollout, shadowMetrics, qualityGate, rolloutPlan, retrievalPolicy and alarms, read fresh (never
    cached)."""
    now = _now()
    hours = window_hours or settings.ROLLOUT_GATE_WINDOW_HOURS
    evaluation = _evaluate(workspace_id=workspace_id, now=now, window_hours=hours)
    gate, current = evaluation.gate, evaluation.settings
    last_at, last_reason = None, None
    if gate.status != "unavailable":
        with workspace_context(workspace_id):
            last_at, last_reason = selectors.last_fallback(
                workspace_id=workspace_id, since=gate.current.start_at
            )
    shadow = shadow_metrics_payload(
        window=gate.current, window_hours=hours, last_fallback_at=last_at, last_fallback_reason=last_reason
    )
    plan = rollout_plan_build(
        evaluated_at=now,
        mode=current.mode,
        gate=gate,
        autopilot_enabled=current.autopilot_enabled,
        autopilot_applied=autopilot_applied,
    )
    return {
        "rollout": {
            "mode": current.mode,
            "autopilotEnabled": current.autopilot_enabled,
            "updatedAt": current.config_updated_at,
            "updatedBy": current.config_updated_by,
        },
        "shadowMetrics": shadow,
        "qualityGate": gate.payload(),
        "rolloutPlan": plan.payload(),
        "retrievalPolicy": {
            "defaultStrategy": current.default_strategy,
            "readyWindowStreak": current.ready_window_streak,
            "lastDecision": current.last_decision,
            "lastEvaluatedAt": current.last_evaluated_at,
            "updatedAt": current.policy_updated_at,
            "updatedBy": current.policy_updated_by,
            "autopilotEnabled": current.default_autopilot_enabled,
        },
        "alarms": rollout_alarms(shadow=shadow, gate=gate, now=now),
    }
