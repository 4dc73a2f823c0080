"""The add path's graph mapping as a function that catches its own errors.

A new memory's whole deterministic mapping (nodes, links, edges) is one statement. It ran inside a savepoint so
that a graph failure could never fail the memory write: SAVEPOINT and RELEASE were two of an add's ten round
trips. The EXCEPTION block of this function is the same subtransaction taken on the server, so the add needs one
round trip for its mapping instead of three, and PL/pgSQL keeps the statement's plan for the session instead of
planning the CTE on every add. SECURITY INVOKER (the default): the caller's row-level security applies.

A statement timeout inside the mapping is caught as well
(OTHERS alone would leave it out), as the savepoint did. It returns the number of nodes it saw (the caller compares it with the nodes it asked for: a node committed
concurrently by another transaction is invisible to this statement, and the caller then maps the long way) and,
when the statement failed, the error instead; nothing of a failed mapping is left behind.
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION graph_mapping_insert_fresh(
    p_ws integer, p_memory uuid, p_types text[], p_keys text[], p_labels text[], p_metadata jsonb[],
    p_link_types text[], p_link_keys text[], p_link_roles text[],
    p_edge_types text[], p_from_types text[], p_from_keys text[], p_to_types text[], p_to_keys text[],
    p_expires timestamptz, OUT node_count bigint, OUT error text
) LANGUAGE plpgsql AS $function$
BEGIN
    WITH input(node_type, node_key, label, metadata) AS (
        SELECT * FROM unnest(p_types, p_keys, p_labels, p_metadata)
    ),
    inserted AS (
        INSERT INTO graph_nodes (workspace_id, node_type, node_key, label, metadata, created_at, updated_at)
        SELECT p_ws, i.node_type, i.node_key, i.label, i.metadata, now(), now() FROM input i
        ON CONFLICT (workspace_id, node_type, node_key) DO NOTHING
        RETURNING id, graph_nodes.node_type, graph_nodes.node_key
    ),
    nodes AS (
        SELECT s.id, s.node_type, s.node_key FROM inserted s
        UNION ALL
        SELECT g.id, g.node_type, g.node_key FROM graph_nodes g
        JOIN input i ON i.node_type = g.node_type AND i.node_key = g.node_key
        WHERE g.workspace_id = p_ws
    ),
    links AS (
        INSERT INTO memory_node_links (workspace_id, memory_id, node_id, role, created_at)
        SELECT p_ws, p_memory, n.id, l.role, now()
        FROM unnest(p_link_types, p_link_keys, p_link_roles) AS l(node_type, node_key, role)
        JOIN nodes n ON n.node_type = l.node_type AND n.node_key = l.node_key
        ON CONFLICT DO NOTHING
        RETURNING 1
    ),
    edges AS (
        INSERT INTO graph_edges (workspace_id, edge_key, from_node_id, to_node_id, edge_type, edge_class,
            weight, confidence, evidence_memory_id, origin, created_at, updated_at, expires_at, last_observed_at,
            retrieval_count)
        SELECT p_ws, 'm:' || p_memory::text || ':' || e.edge_type || ':' || f.id || ':' || t.id, f.id, t.id,
            e.edge_type, 'semantic', 1.0, 1.0, p_memory, 'mapping', now(), now(), p_expires, now(), 0
        FROM unnest(p_edge_types, p_from_types, p_from_keys, p_to_types, p_to_keys)
            AS e(edge_type, from_type, from_key, to_type, to_key)
        JOIN nodes f ON f.node_type = e.from_type AND f.node_key = e.from_key
        JOIN nodes t ON t.node_type = e.to_type AND t.node_key = e.to_key
        ON CONFLICT (workspace_id, edge_key) WHERE expired_at IS NULL DO UPDATE
            SET expires_at = EXCLUDED.expires_at, updated_at = now(), last_observed_at = now()
        RETURNING 1
    )
    -- links and edges run to completion whether or not the outer query reads them (data-modifying CTEs).
    SELECT count(*) INTO node_count FROM nodes;
    error := NULL;
-- OTHERS leaves out a cancelled statement; the client savepoint this replaces caught that too (a statement_timeout
-- that fires inside the mapping), so it is named here: the mapping rolls back and the memory write goes on.
EXCEPTION WHEN OTHERS OR query_canceled THEN
    node_count := NULL;
    error := SQLSTATE || ': ' || SQLERRM;
END
$function$
"""

SIGNATURE = (
    "graph_mapping_insert_fresh(integer, uuid, text[], text[], text[], jsonb[], text[], text[], text[], text[], "
    "text[], text[], text[], text[], timestamptz)"
)


class Migration(migrations.Migration):
    dependencies = [("graphsvc", "0014_edges_by_weight")]

    operations = [
        migrations.RunSQL(sql=FUNCTION, reverse_sql=f"DROP FUNCTION IF EXISTS {SIGNATURE}"),
    ]
