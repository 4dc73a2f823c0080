"""System checks for the database Cairn needs: the extensions, and a runtime role that RLS applies to."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.db import connections
from django.db.utils import OperationalError

REQUIRED_EXTENSIONS = {"vector": "pgvector ≥ 0.8", "pg_trgm": "pg_trgm (PostgreSQL contrib)"}


@register(Tags.database)
def check_extensions(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    if not databases or "default" not in databases:
        return []
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "SELECT name, installed_version FROM pg_available_extensions WHERE name = ANY(%s)",
                [list(REQUIRED_EXTENSIONS)],
            )
            available = {name: installed for name, installed in cursor.fetchall()}
    except OperationalError as exc:
        return [Error(f"Cannot reach the database: {exc}", id="cairn.E000")]
    errors = []
    for name, what in REQUIRED_EXTENSIONS.items():
        if name not in available:
            errors.append(
                Error(
                    f"The PostgreSQL extension '{name}' is not available on this server.",
                    hint=f"Install {what} on the database server; "
                    "Cairn needs PostgreSQL ≥ 15 with pgvector ≥ 0.8.",
                    id="cairn.E001",
                )
            )
    return errors


@register(Tags.database)
def check_runtime_role(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Error]:
    if not databases or "app" not in databases:
        return []
    try:
        with connections["app"].cursor() as cursor:
            cursor.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
            row = cursor.fetchone()
    except OperationalError as exc:
        return [Error(f"Cannot connect as the runtime role: {exc}", id="cairn.E002")]
    if row and (row[0] or row[1]):
        return [
            Error(
                f"The runtime database role {settings.APP_DB_ROLE!r} is a superuser or has BYPASSRLS, so "
                "row-level security would not isolate workspaces.",
                hint="Point DATABASE_APP_URL at a plain role: CREATE ROLE cairn_app LOGIN PASSWORD '…' "
                "NOSUPERUSER NOBYPASSRLS.",
                id="cairn.E003",
            )
        ]
    return []
