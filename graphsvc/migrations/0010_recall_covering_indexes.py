"""Speed of fact recall and community runs at 1M facts.

Covering indexes for current entity facts, one per direction: a BFS hop, a seed's degree count and the community
edge stream read every column they need from the index (index-only scans), so a hop over hundreds of facts no
longer visits hundreds of scattered heap pages. The keys lead with workspace_id and are compared with leakproof
integer equality, so the scans run under the RLS policy; the partial predicate is exactly the "current fact"
filter that recall writes (origin, expired_at, valid_to). Point-in-time reads keep using the *_valid indexes.

The entity-term trigger fired on every UPDATE of graph_nodes and returned early unless a name changed; a
community run sets community_id on up to every entity, so the trigger now fires only when a column it reads is
in the UPDATE (and on INSERT).
"""

from django.db import migrations

COVERED = "id, edge_type, edge_class, confidence, last_observed_at, created_at, retrieval_count, expires_at"
CURRENT = "origin = 'llm_entity' AND expired_at IS NULL AND valid_to IS NULL"


class Migration(migrations.Migration):
    # CONCURRENTLY: a deployed workspace keeps writing facts while the indexes build.
    atomic = False

    dependencies = [("graphsvc", "0009_merge_0007_graph_reasoning_0008_hygiene")]

    operations = [
        migrations.RunSQL(
            sql=[
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS graph_edges_current_from ON graph_edges "
                f"(workspace_id, from_node_id) INCLUDE (to_node_id, {COVERED}) WHERE {CURRENT}",
                "CREATE INDEX CONCURRENTLY IF NOT EXISTS graph_edges_current_to ON graph_edges "
                f"(workspace_id, to_node_id) INCLUDE (from_node_id, {COVERED}) WHERE {CURRENT}",
            ],
            reverse_sql=[
                "DROP INDEX CONCURRENTLY IF EXISTS graph_edges_current_to",
                "DROP INDEX CONCURRENTLY IF EXISTS graph_edges_current_from",
            ],
        ),
        migrations.RunSQL(
            # One statement (this migration is not atomic): no moment without the trigger.
            sql="DO $$ BEGIN DROP TRIGGER IF EXISTS graph_nodes_terms ON graph_nodes; "
                "CREATE TRIGGER graph_nodes_terms AFTER INSERT OR UPDATE OF node_key, label, summary, node_type "
                "ON graph_nodes FOR EACH ROW EXECUTE FUNCTION graph_entity_terms_sync(); END $$",
            reverse_sql="DO $$ BEGIN DROP TRIGGER IF EXISTS graph_nodes_terms ON graph_nodes; "
                        "CREATE TRIGGER graph_nodes_terms AFTER INSERT OR UPDATE ON graph_nodes "
                        "FOR EACH ROW EXECUTE FUNCTION graph_entity_terms_sync(); END $$",
        ),
    ]
