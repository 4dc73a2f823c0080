"""Timestamps on the runtime connection come through psycopg's C loader (config.dbloaders), with the values
and the tzinfo Django's own loader gives."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connections
from psycopg.pq import Format

from config.dbloaders import UtcTimestamptzLoader
from memories.models import Memory
from tenancy.rls import workspace_context
from tests.memories.helpers import personal_workspace_id

pytestmark = pytest.mark.django_db(databases="__all__")


def test_it_reads_timestamps_through_the_c_loader(personas):
    connection = connections["app"]
    connection.ensure_connection()
    loader = connection.connection.adapters.get_loader(1184, Format.TEXT)  # timestamptz
    assert loader is UtcTimestamptzLoader
    with connection.cursor() as cursor:
        cursor.execute("SELECT '2026-01-01 10:00:00.123456+02'::timestamptz, NULL::timestamptz")
        value, null = cursor.fetchone()
    assert value == datetime(2026, 1, 1, 8, 0, 0, 123456, tzinfo=UTC) and value.tzinfo is UTC and null is None

    # Through the ORM and the raw readers alike: aware UTC datetimes, equal to what was written.
    ws = personal_workspace_id(personas.alice)
    written = datetime(2025, 6, 1, 12, 30, 15, 250000, tzinfo=UTC)
    with workspace_context(ws):
        memory = Memory.objects.create(workspace_id=ws, content="a", created_at=written, updated_at=written)
        read = Memory.objects.get(pk=memory.pk)
    assert read.created_at == written and read.created_at.tzinfo is UTC
