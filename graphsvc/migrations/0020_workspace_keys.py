"""Every key of the graph tables carries workspace_id (tenancy.citus_sql): primary keys (id, workspace_id) and
foreign keys between graph tables by (workspace_id, x) -> (workspace_id, id). An edge's superseded_by is cleared
by a trigger when the edge it points at is deleted: ON DELETE SET NULL would null workspace_id as well, which
the composite key includes (and Citus refuses it). The mapping function takes the workspace as bigint (the
type of workspace_id, which Citus delegates the call by) and keeps the values its INSERT computed in the
upsert's update instead of calling now() again. The same schema serves a single PostgreSQL and Citus."""

from importlib import import_module

import django.db.models.deletion
from django.db import migrations, models

from tenancy.citus_sql import workspace_foreign_key, workspace_primary_key

OLD_SIGNATURE = (
    "graph_mapping_insert_fresh(integer, uuid, text[], text[], text[], jsonb[], text[], text[], text[], text[], "
    "text[], text[], text[], text[], timestamptz)"
)
NEW_SIGNATURE = OLD_SIGNATURE.replace("(integer,", "(bigint,")
PREVIOUS_FUNCTION = import_module("graphsvc.migrations.0015_mapping_insert_fresh_function").FUNCTION

FUNCTION = """
CREATE OR REPLACE FUNCTION graph_mapping_insert_fresh(
    p_ws bigint, p_memory uuid, p_types text[], p_keys text[], p_labels text[], p_metadata jsonb[],
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
            SET expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at,
                last_observed_at = EXCLUDED.last_observed_at
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

# On Citus the trigger fires on a shard, whose name is the table's with a shard number: which table fired it
# is told by the name's stem.
TERMS_SYNC_SQL = """
CREATE OR REPLACE FUNCTION graph_entity_terms_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_TABLE_NAME ~ '^graph_nodes(_[0-9]+)?$' THEN
            IF NEW.node_type NOT IN ('person','tool','concept','project','language','file','config','organization','event') THEN
                RETURN NEW;
            END IF;
            IF TG_OP = 'UPDATE' AND NEW.node_key IS NOT DISTINCT FROM OLD.node_key
               AND NEW.label IS NOT DISTINCT FROM OLD.label AND NEW.summary IS NOT DISTINCT FROM OLD.summary THEN
                RETURN NEW;
            END IF;
            DELETE FROM graph_entity_terms WHERE workspace_id = NEW.workspace_id AND node_id = NEW.id;
            INSERT INTO graph_entity_terms (workspace_id, node_id, term, weight)
                SELECT NEW.workspace_id, NEW.id, w, 1 FROM graph_entity_words(NEW.node_key || ' ' || NEW.label, 16) w
                UNION
                SELECT NEW.workspace_id, NEW.id, a.w, 1 FROM graph_entity_aliases ga,
                    LATERAL graph_entity_words(ga.alias, 16) a(w)
                    WHERE ga.workspace_id = NEW.workspace_id AND ga.node_id = NEW.id
                UNION
                SELECT NEW.workspace_id, NEW.id, w, 2 FROM graph_entity_words(NEW.summary, 24) w
            ON CONFLICT DO NOTHING;
        ELSE
            INSERT INTO graph_entity_terms (workspace_id, node_id, term, weight)
                SELECT NEW.workspace_id, NEW.node_id, w, 1 FROM graph_entity_words(NEW.alias, 16) w
            ON CONFLICT DO NOTHING;
        END IF;
        RETURN NEW;
    END $$;
"""
TERMS_SYNC_REVERSE_SQL = TERMS_SYNC_SQL.replace("TG_TABLE_NAME ~ '^graph_nodes(_[0-9]+)?$'", "TG_TABLE_NAME = 'graph_nodes'")

# Statement triggers read the deleted rows' transition table once, by workspace, and then touch the other
# table by (workspace_id, ids): Citus cannot plan a join of a distributed table with a transition table.
def _gone_function(name: str, statement: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE ws bigint; ids bigint[];
BEGIN
    FOR ws, ids IN SELECT workspace_id, array_agg(id) FROM gone GROUP BY workspace_id LOOP
        {statement};
    END LOOP;
    RETURN NULL;
END $$;
"""


MEMBERS_GONE_SQL = _gone_function(
    "graph_community_members_node_gone",
    "DELETE FROM graph_community_members WHERE workspace_id = ws AND node_id = ANY(ids)",
) + _gone_function(
    "graph_community_members_community_gone",
    "DELETE FROM graph_community_members WHERE workspace_id = ws AND community_id = ANY(ids)",
)
MEMBERS_GONE_REVERSE_SQL = """
CREATE OR REPLACE FUNCTION graph_community_members_node_gone() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM graph_community_members m USING gone g WHERE m.workspace_id = g.workspace_id AND m.node_id = g.id;
        RETURN NULL;
    END $$;
CREATE OR REPLACE FUNCTION graph_community_members_community_gone() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM graph_community_members m USING gone g
            WHERE m.workspace_id = g.workspace_id AND m.community_id = g.id;
        RETURN NULL;
    END $$;
"""

SUPERSEDED_CLEAR_SQL = _gone_function(
    "graph_edges_superseded_gone",
    "UPDATE graph_edges SET superseded_by_id = NULL WHERE workspace_id = ws AND superseded_by_id = ANY(ids)",
) + """
CREATE TRIGGER graph_edges_superseded_gone AFTER DELETE ON graph_edges
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION graph_edges_superseded_gone();
"""

SUPERSEDED_CLEAR_REVERSE_SQL = """
DROP TRIGGER IF EXISTS graph_edges_superseded_gone ON graph_edges;
DROP FUNCTION IF EXISTS graph_edges_superseded_gone();
"""


def _node_fk(model_name: str, name: str, related_name: str = "+") -> migrations.AlterField:
    return migrations.AlterField(
        model_name=model_name,
        name=name,
        field=models.ForeignKey(
            db_constraint=False,
            db_index=False,
            on_delete=django.db.models.deletion.CASCADE,
            related_name=related_name,
            to="graphsvc.graphnode",
        ),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("graphsvc", "0019_heuristic_edge_origin"),
        ("memories", "0014_workspace_keys"),
    ]

    operations = [
        # The single-column foreign keys go first: the primary keys they point at cannot change under them.
        _node_fk("graphedge", "from_node"),
        _node_fk("graphedge", "to_node"),
        _node_fk("memorynodelink", "node"),
        _node_fk("graphentityalias", "node", related_name="aliases"),
        migrations.AlterField(
            model_name="graphedge",
            name="superseded_by",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="graphsvc.graphedge",
            ),
        ),
        migrations.RunSQL(
            sql="ALTER TABLE graph_entity_terms DROP CONSTRAINT graph_entity_terms_node_fk; "
            "ALTER TABLE graph_fact_evidence DROP CONSTRAINT graph_fact_evidence_edge_fk",
            reverse_sql="ALTER TABLE graph_entity_terms ADD CONSTRAINT graph_entity_terms_node_fk "
            "FOREIGN KEY (node_id) REFERENCES graph_nodes (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED; "
            "ALTER TABLE graph_fact_evidence ADD CONSTRAINT graph_fact_evidence_edge_fk "
            "FOREIGN KEY (edge_id) REFERENCES graph_edges (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED",
        ),
        workspace_primary_key("graph_nodes"),
        workspace_primary_key("graph_edges"),
        workspace_primary_key("graph_fact_evidence"),
        workspace_primary_key("memory_node_links"),
        workspace_primary_key("graph_entity_aliases"),
        workspace_primary_key("graph_communities"),
        workspace_primary_key("graph_entity_merges"),
        workspace_primary_key("llm_usage"),
        workspace_foreign_key("graph_edges", "from_node_id", references="graph_nodes", name="graph_edges_from_fk"),
        workspace_foreign_key("graph_edges", "to_node_id", references="graph_nodes", name="graph_edges_to_fk"),
        workspace_foreign_key(
            "graph_edges", "superseded_by_id", references="graph_edges", name="graph_edges_superseded_by_fk"
        ),
        migrations.RunSQL(sql=SUPERSEDED_CLEAR_SQL, reverse_sql=SUPERSEDED_CLEAR_REVERSE_SQL),
        migrations.RunSQL(sql=TERMS_SYNC_SQL, reverse_sql=TERMS_SYNC_REVERSE_SQL),
        migrations.RunSQL(sql=MEMBERS_GONE_SQL, reverse_sql=MEMBERS_GONE_REVERSE_SQL),
        workspace_foreign_key(
            "memory_node_links", "node_id", references="graph_nodes", name="memory_node_links_node_fk"
        ),
        workspace_foreign_key(
            "graph_entity_aliases",
            "node_id",
            references="graph_nodes",
            name="graph_entity_aliases_node_fk",
            on_delete="CASCADE",
        ),
        workspace_foreign_key(
            "graph_entity_terms",
            "node_id",
            references="graph_nodes",
            name="graph_entity_terms_node_fk",
            on_delete="CASCADE",
        ),
        workspace_foreign_key(
            "graph_fact_evidence",
            "edge_id",
            references="graph_edges",
            name="graph_fact_evidence_edge_fk",
            on_delete="CASCADE",
        ),
        migrations.RunSQL(
            sql=[f"DROP FUNCTION {OLD_SIGNATURE}", FUNCTION],
            reverse_sql=[f"DROP FUNCTION {NEW_SIGNATURE}", PREVIOUS_FUNCTION],
        ),
    ]
