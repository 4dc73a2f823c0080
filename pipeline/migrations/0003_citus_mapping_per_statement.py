"""On Citus only: the graph mapping function of a new memory as one statement per node, link and edge.

The single-statement version (graphsvc 0020) reads its input with unnest() inside data-modifying CTEs; on a
worker Citus plans that statement in steps whose intermediate results go to the other nodes, and inside a
transaction that has already written the memory (every memories/add) those connections fail ("failure on
connection marked as essential"), so no new memory got its graph there. Here each statement is an INSERT
... VALUES or a SELECT by (workspace_id, node_type, node_key): planned to the workspace's own shard and run
on the worker the call was delegated to, without another connection. A statement sees what a concurrent
transaction committed, so the mapping is complete whenever it succeeds. Single-node PostgreSQL keeps the
one-statement version.
"""

from importlib import import_module

from django.db import migrations

from tenancy.citus_sql import citus_installed_on

SINGLE_STATEMENT_FUNCTION = import_module("graphsvc.migrations.0020_workspace_keys").FUNCTION

FUNCTION = """
CREATE OR REPLACE FUNCTION graph_mapping_insert_fresh(
    p_ws bigint, p_memory uuid, p_types text[], p_keys text[], p_labels text[], p_metadata jsonb[],
    p_link_types text[], p_link_keys text[], p_link_roles text[],
    p_edge_types text[], p_from_types text[], p_from_keys text[], p_to_types text[], p_to_keys text[],
    p_expires timestamptz, OUT node_count bigint, OUT error text
) LANGUAGE plpgsql AS $function$
DECLARE
    i integer;
    node_id bigint;
    to_id bigint;
BEGIN
    node_count := 0;
    FOR i IN 1 .. coalesce(array_length(p_types, 1), 0) LOOP
        INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, metadata, created_at, updated_at)
        VALUES (p_ws, p_types[i], p_keys[i], p_labels[i], p_metadata[i], now(), now())
        ON CONFLICT (workspace_id, node_type, node_key) DO NOTHING;
        node_id := NULL;
        SELECT g.id INTO node_id FROM graph_nodes g
        WHERE g.workspace_id = p_ws AND g.node_type = p_types[i] AND g.node_key = p_keys[i];
        IF node_id IS NOT NULL THEN
            node_count := node_count + 1;
        END IF;
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(p_link_types, 1), 0) LOOP
        node_id := NULL;
        SELECT g.id INTO node_id FROM graph_nodes g
        WHERE g.workspace_id = p_ws AND g.node_type = p_link_types[i] AND g.node_key = p_link_keys[i];
        CONTINUE WHEN node_id IS NULL;
        INSERT INTO memory_node_links (workspace_id, memory_id, node_id, role, created_at)
        VALUES (p_ws, p_memory, node_id, p_link_roles[i], now())
        ON CONFLICT DO NOTHING;
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(p_edge_types, 1), 0) LOOP
        node_id := NULL;
        to_id := NULL;
        SELECT g.id INTO node_id FROM graph_nodes g
        WHERE g.workspace_id = p_ws AND g.node_type = p_from_types[i] AND g.node_key = p_from_keys[i];
        SELECT g.id INTO to_id FROM graph_nodes g
        WHERE g.workspace_id = p_ws AND g.node_type = p_to_types[i] AND g.node_key = p_to_keys[i];
        CONTINUE WHEN node_id IS NULL OR to_id IS NULL;
        INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class,
            weight, confidence, evidence_memory_id, origin, created_at, updated_at, expires_at, last_observed_at,
            retrieval_count)
        VALUES (p_ws, 'm:' || p_memory::text || ':' || p_edge_types[i] || ':' || node_id || ':' || to_id, node_id,
            to_id, p_edge_types[i], 'semantic', 1.0, 1.0, p_memory, 'mapping', now(), now(), p_expires, now(), 0)
        ON CONFLICT (workspace_id, edge_key) WHERE expired_at IS NULL DO UPDATE
            SET expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at,
                last_observed_at = EXCLUDED.last_observed_at;
    END LOOP;
    error := NULL;
EXCEPTION WHEN OTHERS OR query_canceled THEN
    node_count := NULL;
    error := SQLSTATE || ': ' || SQLERRM;
END
$function$
"""


def per_statement(apps, schema_editor):
    if citus_installed_on(schema_editor):
        schema_editor.execute(FUNCTION)


def single_statement(apps, schema_editor):
    if citus_installed_on(schema_editor):
        schema_editor.execute(SINGLE_STATEMENT_FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("pipeline", "0002_workspace_keys_and_citus")]

    operations = [migrations.RunPython(per_statement, single_statement)]
