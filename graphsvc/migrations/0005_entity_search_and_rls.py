from django.db import migrations

from tenancy.rls_sql import enable_workspace_rls

ENTITY_TYPES = "('person','tool','concept','project','language','file','config','organization','event')"


class Migration(migrations.Migration):
    dependencies = [("graphsvc", "0004_entities_facts_communities")]

    operations = [
        enable_workspace_rls("graph_entity_aliases"),
        enable_workspace_rls("graph_communities"),
        enable_workspace_rls("graph_settings"),
        enable_workspace_rls("llm_usage"),
        # Entity search (Zeph): name weighted over summary; 'simple' so names are not stemmed and prefix queries
        # (`tok:*`) match what was typed.
        migrations.RunSQL(
            sql=[
                "ALTER TABLE graph_nodes ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS ("
                "setweight(to_tsvector('simple', coalesce(label, '')), 'A') || "
                "setweight(to_tsvector('simple', coalesce(node_key, '')), 'A') || "
                "setweight(to_tsvector('simple', left(coalesce(summary, ''), 4000)), 'B')) STORED",
                f"CREATE INDEX graph_nodes_entity_tsv ON graph_nodes USING gin (search_tsv) "
                f"WHERE node_type IN {ENTITY_TYPES}",
                f"CREATE INDEX graph_nodes_entity_trgm ON graph_nodes USING gin (node_key gin_trgm_ops) "
                f"WHERE node_type IN {ENTITY_TYPES}",
                "CREATE INDEX graph_entity_aliases_alias ON graph_entity_aliases (workspace_id, alias)",
                # Point-in-time reads walk invalidated facts too.
                "CREATE INDEX graph_edges_from_valid ON graph_edges (workspace_id, from_node_id, valid_from) "
                "WHERE origin = 'llm_entity'",
                "CREATE INDEX graph_edges_to_valid ON graph_edges (workspace_id, to_node_id, valid_from) "
                "WHERE origin = 'llm_entity'",
            ],
            reverse_sql=[
                "DROP INDEX IF EXISTS graph_edges_to_valid",
                "DROP INDEX IF EXISTS graph_edges_from_valid",
                "DROP INDEX IF EXISTS graph_entity_aliases_alias",
                "DROP INDEX IF EXISTS graph_nodes_entity_trgm",
                "DROP INDEX IF EXISTS graph_nodes_entity_tsv",
                "ALTER TABLE graph_nodes DROP COLUMN IF EXISTS search_tsv",
            ],
        ),
    ]
