"""Row-level security is the tenant boundary: checked on the schema, on the role and on real queries."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from memories.models import Memory
from tenancy.rls import workspace_context


def tables_with_workspace_id() -> list[str]:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            """
            SELECT c.table_name FROM information_schema.columns c
            JOIN information_schema.tables t USING (table_schema, table_name)
            WHERE c.table_schema = 'public' AND c.column_name = 'workspace_id' AND t.table_type = 'BASE TABLE'
            ORDER BY 1
            """
        )
        return [row[0] for row in cursor.fetchall()]


def test_it_covers_every_table_with_a_workspace_id():
    tables = tables_with_workspace_id()
    assert "memories" in tables and "idempotency_records" in tables
    with connections["default"].cursor() as cursor:
        for table in tables:
            cursor.execute(
                "SELECT relrowsecurity, relforcerowsecurity FROM pg_class "
                "WHERE relname = %s AND relkind = 'r'",
                [table],
            )
            enabled, forced = cursor.fetchone()
            assert enabled and forced, f"{table} lacks ENABLE/FORCE ROW LEVEL SECURITY"
            cursor.execute("SELECT qual, with_check FROM pg_policies WHERE tablename = %s", [table])
            policies = cursor.fetchall()
            assert policies, f"{table} has no policy"
            for using, with_check in policies:
                assert "app.workspace_id" in using and "app.workspace_id" in (with_check or ""), table


def test_it_connects_as_a_role_rls_applies_to():
    with connections["app"].cursor() as cursor:
        cursor.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        superuser, bypass = cursor.fetchone()
        cursor.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user"
        )
        owned = cursor.fetchone()[0]
    assert not superuser and not bypass
    assert owned == 0


def _make_memory(workspace_id: int, content: str) -> Memory:
    now = timezone.now()
    with workspace_context(workspace_id):
        return Memory.objects.create(
            workspace_id=workspace_id, content=content, created_at=now, updated_at=now
        )


def test_it_shows_nothing_without_a_workspace(personas):
    _make_memory(personas.acme.id, "acme roadmap")
    with transaction.atomic(using="app"):
        assert Memory.objects.count() == 0
        with connections["app"].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM memories")
            assert cursor.fetchone()[0] == 0


def test_it_shows_only_the_current_workspace(personas):
    _make_memory(personas.acme.id, "acme roadmap")
    _make_memory(personas.globex.id, "globex roadmap")
    with workspace_context(personas.globex.id):
        # Even without a workspace filter in the query, RLS hides acme's row.
        assert list(Memory.objects.values_list("content", flat=True)) == ["globex roadmap"]


def test_it_refuses_writes_into_another_workspace(personas):
    now = timezone.now()
    with pytest.raises(DatabaseError, match="row-level security"), workspace_context(personas.globex.id):
        Memory.objects.create(
            workspace_id=personas.acme.id, content="planted", created_at=now, updated_at=now
        )


def test_it_refuses_to_nest_another_workspace(personas):
    with (
        pytest.raises(RuntimeError),
        workspace_context(personas.acme.id),
        workspace_context(personas.globex.id),
    ):
        pass


def test_it_cannot_update_rows_of_another_workspace(personas):
    memory = _make_memory(personas.acme.id, "acme roadmap")
    with workspace_context(personas.globex.id):
        assert Memory.objects.filter(pk=memory.pk).update(content="hijacked") == 0
    with workspace_context(personas.acme.id):
        assert Memory.objects.get(pk=memory.pk).content == "acme roadmap"
