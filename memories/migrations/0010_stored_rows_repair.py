"""Repair stored rows that break the write rules every read relies on (memories.repair): timestamps outside
years 1-9999 in UTC, metadata deeper than 20 levels or not an object, numbers that are not finite, and graph
metadata that export/import round trips wrapped in JSON strings. One workspace at a time: FORCE RLS applies to
the owner running the migration too."""

from django.db import migrations

from memories.repair import stored_rows_repair


def repair(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM workspaces ORDER BY id")
        for (workspace_id,) in cursor.fetchall():
            cursor.execute("SELECT set_config('app.workspace_id', %s, true)", [str(workspace_id)])
            repaired = stored_rows_repair(cursor, workspace_id=workspace_id, rescan=False)
            if repaired:
                print(f"  workspace {workspace_id}: repaired {repaired}")
        cursor.execute("SELECT set_config('app.workspace_id', '', true)")


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0009_ranking_settings'),
        ('graphsvc', '0016_fact_evidence'),
    ]

    operations = [
        migrations.RunPython(repair, migrations.RunPython.noop),
    ]
