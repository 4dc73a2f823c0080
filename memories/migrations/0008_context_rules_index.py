"""The rules of context/get through an index (latency).

context/get lists a workspace's rules (layer rule or type rule) on every call, newest first per scope. Without an
index of their own the rows came from walking the workspace's newest memories and discarding the rest (~8 ms on a
100k-memory workspace where 10 % are rules). This partial index holds only rules, in the order the query asks for,
so the first CONTEXT_MAX_RULES rows are read directly. Built concurrently: writes continue while it builds.
"""

from django.db import migrations


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("memories", "0007_merge_0005_hygiene_0006_read_path")]

    operations = [
        migrations.RunSQL(
            sql="""
            CREATE INDEX CONCURRENTLY IF NOT EXISTS memories_ws_rules
            ON memories (workspace_id, scope DESC, created_at DESC, id DESC)
            WHERE deleted_at IS NULL AND (layer = 'rule' OR type = 'rule')
            """,
            reverse_sql="DROP INDEX CONCURRENTLY IF EXISTS memories_ws_rules",
        ),
    ]
