"""Who is calling, in one round trip: rate-limit hit, API key, its user, the at-most-once-a-minute touch and
the workspace a scope without tenantId or GitHub project routes to.

Separately these were five to six statements on every SDK request (the counter upsert, the key with its user,
the touch, the user's settings, the personal workspace) — about a third of a memories/add under load. One
statement keeps their order of decisions (the counter is spent before the key is looked up, so unknown keys
are rate limited too) and their exactness: the counter is still one INSERT … ON CONFLICT DO UPDATE, serialised
by its row lock.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import connections
from django.db.models import Model

from config.prepared import prepared_cursor
from tenancy.models import ApiKey, Membership, UserSettings, Workspace
from tenancy.ratelimit import RateLimitDecision
from tenancy.rls import connection_on_citus

TOUCH_INTERVAL = timedelta(seconds=60)


def _columns(model: type[Model], alias: str) -> tuple[list[str], str]:
    names = [field.attname for field in model._meta.concrete_fields]
    sql = ", ".join(f'{alias}."{field.column}"' for field in model._meta.concrete_fields)
    return names, sql


def _statement(*, split_workspaces: bool = False) -> tuple[str, list[str], list[str]]:
    """The caller's lookup in one statement. With `split_workspaces` (on Citus) the statement leaves out
    `workspaces`, a reference table there: joined with the coordinator's own tables it made Citus ship every
    other table's rows to a worker and commit the statement's writes by two-phase commit, on every request;
    `_workspaces_lookup` then reads it on its own."""
    user_model = get_user_model()
    key_names, key_sql = _columns(ApiKey, "k")
    user_names, user_sql = _columns(user_model, "u")
    personal = (
        "NULL::bigint"
        if split_workspaces
        else f"""(SELECT w.id FROM {Workspace._meta.db_table} w
         WHERE w.kind = %(personal)s AND w.personal_owner_id = u.id LIMIT 1)"""
    )
    pin_columns = (
        "NULL::text, NULL::bigint, NULL::text, NULL::text"
        if split_workspaces
        else f"""pin.kind, pin.parent_id, pin.tenant_id,
        (SELECT m.role FROM {Membership._meta.db_table} m
         WHERE m.member_workspace_id = coalesce(pin.parent_id, pin.id) AND m.user_id = u.id)"""
    )
    pin_join = (
        ""
        if split_workspaces
        else f"LEFT JOIN {Workspace._meta.db_table} pin ON pin.id = k.pinned_workspace_id"
    )
    sql = f"""
    WITH hit AS (
        INSERT INTO rate_limit_counters (bucket, window_start, hits) VALUES (%(bucket)s, %(window)s, 1)
        ON CONFLICT (bucket, window_start) DO UPDATE SET hits = rate_limit_counters.hits + 1
        RETURNING hits
    ),
    touched AS (
        -- Only a call that is let through touches the key, as before: a blocked or refused one changes
        -- nothing.
        UPDATE {ApiKey._meta.db_table} t SET last_used_at = %(now)s
        FROM hit, {user_model._meta.db_table} tu
        WHERE t.key_hash = %(bucket)s AND hit.hits <= %(limit)s AND tu.id = t.user_id AND tu.is_active
          AND t.revoked_at IS NULL AND t.expires_at > %(now)s
          AND (t.last_used_at IS NULL OR t.last_used_at < %(touch_before)s)
        RETURNING t.id
    )
    SELECT hit.hits, (SELECT count(*) FROM touched), u.id IS NOT NULL, s.routing_mode,
        {personal},
        active.member_workspace_id, active.role,
        {pin_columns},
        {key_sql}, {user_sql}
    FROM hit
    LEFT JOIN {ApiKey._meta.db_table} k ON k.key_hash = %(bucket)s
    LEFT JOIN {user_model._meta.db_table} u ON u.id = k.user_id
    LEFT JOIN {UserSettings._meta.db_table} s ON s.user_id = u.id
    LEFT JOIN {Membership._meta.db_table} active
        ON active.member_workspace_id = s.active_org_id AND active.user_id = u.id
    {pin_join}
    """
    return sql, key_names, user_names


def _workspaces_lookup(
    *, user_id: int, pinned_workspace_id: int | None
) -> tuple[int | None, tuple[str, int | None, str | None, str | None] | None]:
    """On Citus: the user's personal workspace and the key's pinned one (kind, parent, tenant and the user's
    membership role where it counts), read from the reference table in a statement of its own (one task, on
    the coordinator's copy), then the membership from the coordinator's table."""
    with prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT id, kind, parent_id, tenant_id, personal_owner_id FROM {Workspace._meta.db_table} "
            "WHERE id = %(pin)s OR (kind = %(personal)s AND personal_owner_id = %(user)s)",
            {"pin": pinned_workspace_id, "personal": Workspace.Kind.PERSONAL, "user": user_id},
        )
        rows = cursor.fetchall()
    personal_id = min(
        (row[0] for row in rows if row[1] == Workspace.Kind.PERSONAL and row[4] == user_id), default=None
    )
    pinned = next((row for row in rows if row[0] == pinned_workspace_id), None)
    if pinned is None:
        return personal_id, None
    with prepared_cursor() as cursor:
        cursor.execute(
            f"SELECT role FROM {Membership._meta.db_table} WHERE member_workspace_id = %s AND user_id = %s",
            [pinned[2] if pinned[2] is not None else pinned[0], user_id],
        )
        role = cursor.fetchone()
    return personal_id, (pinned[1], pinned[2], pinned[3], role[0] if role else None)


_STATEMENTS: dict[bool, tuple[str, list[str], list[str]]] = {}
# Columns ahead of the key's and the user's.
_FIXED = 11


@dataclass(frozen=True)
class PinnedWorkspace:
    """The one workspace a pinned key may act in, and the user's membership role where it counts (the
    workspace itself, or an SDK tenant's parent); None once the user is no longer a member."""

    id: int
    kind: str
    parent_id: int | None
    tenant_id: str | None
    membership_role: str | None


@dataclass(frozen=True)
class CallerLookup:
    """What one statement tells about a presented key. `api_key`/`user` are None for an unknown key."""

    rate: RateLimitDecision
    api_key: ApiKey | None
    user: User | None
    routing_mode: str
    # What routed_workspace() chooses from when no GitHub owner is involved: the active org (only while the
    # user is still its member, with the membership's role) and the personal workspace (None for a user who
    # has none yet).
    active_org_id: int | None
    active_org_role: str | None
    personal_workspace_id: int | None
    pin: PinnedWorkspace | None


def caller_lookup(
    *, key_hash: str, limit: int, window_seconds: int, now: datetime, clock: float | None = None
) -> CallerLookup:
    split = connection_on_citus()
    if split not in _STATEMENTS:
        _STATEMENTS[split] = _statement(split_workspaces=split)
    sql, key_names, user_names = _STATEMENTS[split]
    clock = time.time() if clock is None else clock
    window_start = int(clock // window_seconds) * window_seconds
    params = {
        "bucket": key_hash,
        "window": window_start,
        "limit": limit,
        "now": now,
        "touch_before": now - TOUCH_INTERVAL,
        "personal": Workspace.Kind.PERSONAL,
    }
    # Prepared (every SDK request runs it; its plan is key lookups whatever the values): planning was 0.9 of
    # its 1.2 ms of PostgreSQL CPU.
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if random.random() < 1 / 512:
        with connections["app"].cursor() as cursor:
            # Old windows are garbage; clearing them now and then keeps the unlogged table small.
            cursor.execute(
                "DELETE FROM rate_limit_counters WHERE window_start < %s", [window_start - window_seconds]
            )
    hits, touched, found, routing_mode, personal_id, active_org_id, active_org_role = row[:7]
    pin_kind, pin_parent_id, pin_tenant_id, pin_membership_role = row[7:11]
    retry_after = max(1, math.ceil(window_start + window_seconds - clock))
    rate = RateLimitDecision(
        allowed=hits <= limit, limit=limit, remaining=max(0, limit - hits), retry_after_seconds=retry_after
    )
    api_key = user = None
    if found:
        key_values = row[_FIXED : _FIXED + len(key_names)]
        user_values = row[_FIXED + len(key_names) :]
        api_key = ApiKey.from_db("app", key_names, key_values)
        user = get_user_model().from_db("app", user_names, user_values)
        api_key.user = user  # no second query when a caller reads api_key.user
        if touched:
            api_key.last_used_at = now
        if split:
            personal_id, pinned = _workspaces_lookup(
                user_id=user.pk, pinned_workspace_id=api_key.workspace_id
            )
            if pinned is not None:
                pin_kind, pin_parent_id, pin_tenant_id, pin_membership_role = pinned
    pin = None
    if api_key is not None and api_key.workspace_id is not None and pin_kind is not None:
        pin = PinnedWorkspace(
            id=api_key.workspace_id,
            kind=pin_kind,
            parent_id=pin_parent_id,
            tenant_id=pin_tenant_id,
            membership_role=pin_membership_role,
        )
    return CallerLookup(
        rate=rate,
        api_key=api_key,
        user=user,
        routing_mode=routing_mode or UserSettings.RoutingMode.AUTO,
        active_org_id=active_org_id,
        active_org_role=active_org_role,
        personal_workspace_id=personal_id,
        pin=pin,
    )
