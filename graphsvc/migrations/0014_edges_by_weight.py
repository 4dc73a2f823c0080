"""Edges of a node in weight order, for graph expansion's bounded read at hubs (graphsvc/expansion.py).

Expansion keeps each frontier node's best edges by score; it used to read every edge of the node to find them. A
user or repo node carries one mapping edge per memory written (about, mentions, authored_by are keyed by memory),
so in a busy workspace every context/get read tens of thousands of edges at hop 1. These indexes hand out a
node's active edges heaviest first, with what the ranking needs included, so a capped read is an index-only scan.
"""

from django.db import migrations

ACTIVE = "expired_at IS NULL"
INCLUDED = "edge_type, confidence, expires_at"


class Migration(migrations.Migration):
    # CONCURRENTLY: a deployed workspace keeps writing while the indexes build.
    atomic = False

    dependencies = [("graphsvc", "0013_superseded_by_index")]

    operations = [
        migrations.RunSQL(
            sql=[
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS graph_edges_from_by_weight ON graph_edges "
                f"(workspace_id, from_node_id, weight DESC, id) INCLUDE (to_node_id, {INCLUDED}) WHERE {ACTIVE}",
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS graph_edges_to_by_weight ON graph_edges "
                f"(workspace_id, to_node_id, weight DESC, id) INCLUDE (from_node_id, {INCLUDED}) WHERE {ACTIVE}",
            ],
            reverse_sql=[
                "DROP INDEX CONCURRENTLY IF EXISTS graph_edges_to_by_weight",
                "DROP INDEX CONCURRENTLY IF EXISTS graph_edges_from_by_weight",
            ],
        ),
    ]
