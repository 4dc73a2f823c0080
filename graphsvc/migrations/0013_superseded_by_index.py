"""An index for graph_edges.superseded_by_id, the self-reference a newer fact sets on the one it replaced.

Deleting an edge makes PostgreSQL clear that column on every edge pointing at it (ON DELETE SET NULL), and with no
index on it each deleted edge cost a sequential scan of the table: about 100 ms per edge at 1M edges, so forgetting
one memory (its mapping and similarity edges) took close to a second and the eviction of expired edges far more.
Only replaced facts carry the column, so the index is partial and small.
"""

from django.db import migrations


class Migration(migrations.Migration):
    # CONCURRENTLY: a deployed workspace keeps writing while the index builds.
    atomic = False

    dependencies = [("graphsvc", "0012_community_member_array_drop")]

    operations = [
        migrations.RunSQL(
            sql="CREATE INDEX CONCURRENTLY IF NOT EXISTS graph_edges_superseded_by ON graph_edges (superseded_by_id) "
            "WHERE superseded_by_id IS NOT NULL",
            reverse_sql="DROP INDEX CONCURRENTLY IF EXISTS graph_edges_superseded_by",
        ),
    ]
