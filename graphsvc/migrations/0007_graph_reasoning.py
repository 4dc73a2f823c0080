"""Graph reasoning and upkeep: per-workspace recall/decay/eviction settings and a search-term table.

Entity seed search cannot rely on the GIN indexes of 0005 for the runtime role: under row-level security the
planner may only push leakproof operators into an index scan ahead of the policy, and neither `@@` nor the trigram
`%` is leakproof, so both end up as filters over every entity of the workspace. Text comparison operators (`=`,
`~>=~`, `~<~`) are leakproof, so the words of entity names, aliases and summaries are kept in a b-tree table and
looked up by equality and prefix range. Triggers keep it in step with graph_nodes and graph_entity_aliases, so the
extraction code needs no change.
"""

import django.db.models.deletion
from django.db import migrations, models

from tenancy.rls_sql import enable_workspace_rls

ENTITY_TYPES = "('person','tool','concept','project','language','file','config','organization','event')"

# weight 1: a word of the name or of an alias; weight 2: a word of the summary (first 24 distinct words).
TERMS_SQL = [
    # Entities are deleted in raw SQL (eviction, clear, orphan pruning): their terms must go with them there too.
    "ALTER TABLE graph_entity_terms ADD CONSTRAINT graph_entity_terms_node_fk FOREIGN KEY (node_id) "
    "REFERENCES graph_nodes(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED",
    """
    CREATE FUNCTION graph_entity_words(text, integer) RETURNS SETOF text LANGUAGE sql IMMUTABLE AS $$
        SELECT DISTINCT w FROM (
            SELECT left(w, 64) AS w, min(o) AS o
            FROM regexp_split_to_table(lower(coalesce($1, '')), '[^[:alnum:]]+') WITH ORDINALITY AS t(w, o)
            WHERE length(w) >= 2 GROUP BY 1 ORDER BY 2 LIMIT $2
        ) words
    $$
    """,
    f"""
    CREATE FUNCTION graph_entity_terms_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_TABLE_NAME = 'graph_nodes' THEN
            IF NEW.node_type NOT IN {ENTITY_TYPES} THEN
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
    END $$
    """,
    "CREATE TRIGGER graph_nodes_terms AFTER INSERT OR UPDATE ON graph_nodes "
    "FOR EACH ROW EXECUTE FUNCTION graph_entity_terms_sync()",
    "CREATE TRIGGER graph_entity_aliases_terms AFTER INSERT ON graph_entity_aliases "
    "FOR EACH ROW EXECUTE FUNCTION graph_entity_terms_sync()",
    # Existing entities, one workspace at a time: FORCE RLS applies to the owner running the migration too.
    f"""
    DO $$
    DECLARE ws bigint;
    BEGIN
        FOR ws IN SELECT DISTINCT workspace_id FROM graph_nodes LOOP
            PERFORM set_config('app.workspace_id', ws::text, true);
            INSERT INTO graph_entity_terms (workspace_id, node_id, term, weight)
                SELECT n.workspace_id, n.id, w, 1 FROM graph_nodes n,
                    LATERAL graph_entity_words(n.node_key || ' ' || n.label, 16) w
                    WHERE n.workspace_id = ws AND n.node_type IN {ENTITY_TYPES}
                UNION
                SELECT a.workspace_id, a.node_id, w, 1 FROM graph_entity_aliases a,
                    LATERAL graph_entity_words(a.alias, 16) w WHERE a.workspace_id = ws
                UNION
                SELECT n.workspace_id, n.id, w, 2 FROM graph_nodes n, LATERAL graph_entity_words(n.summary, 24) w
                    WHERE n.workspace_id = ws AND n.node_type IN {ENTITY_TYPES}
            ON CONFLICT DO NOTHING;
        END LOOP;
        PERFORM set_config('app.workspace_id', '', true);
    END $$
    """,
    # Recall reads the current facts of a node; decay and eviction look for old invalidated facts.
    "CREATE INDEX graph_edges_expired_at ON graph_edges (workspace_id, expired_at) WHERE expired_at IS NOT NULL",
]

TERMS_REVERSE = [
    "DROP INDEX IF EXISTS graph_edges_expired_at",
    "DROP TRIGGER IF EXISTS graph_entity_aliases_terms ON graph_entity_aliases",
    "DROP TRIGGER IF EXISTS graph_nodes_terms ON graph_nodes",
    "DROP FUNCTION IF EXISTS graph_entity_terms_sync()",
    "DROP FUNCTION IF EXISTS graph_entity_words(text, integer)",
]


class Migration(migrations.Migration):
    dependencies = [("graphsvc", "0006_db_cascades"), ("tenancy", "0002_extensions_and_rate_limits")]

    operations = [
        migrations.AddField(
            model_name="graphsettings",
            name="recall_strategy",
            field=models.CharField(default="bfs", db_default="bfs", max_length=16),
        ),
        migrations.AddField(
            model_name="graphsettings",
            name="decay_rate",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="graphsettings",
            name="decay_rates",
            field=models.JSONField(default=dict, db_default={}),
        ),
        migrations.AddField(
            model_name="graphsettings",
            name="max_entities",
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="graphsettings",
            name="last_eviction",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="graphsettings",
            name="communities_run_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="graphsettings",
            name="retrieval_decay_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="GraphEntityTerm",
            fields=[
                ("pk", models.CompositePrimaryKey("workspace", "term", "node", "weight", blank=True, editable=False,
                                                  primary_key=True, serialize=False)),
                ("term", models.CharField(db_collation="C", max_length=64)),
                ("weight", models.SmallIntegerField()),
                ("node", models.ForeignKey(db_constraint=False, db_index=False,
                                           on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                           to="graphsvc.graphnode")),
                ("workspace", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                                related_name="+", to="tenancy.workspace")),
            ],
            options={
                "db_table": "graph_entity_terms",
                "indexes": [models.Index(fields=["workspace", "node"], name="graph_entity_terms_node")],
            },
        ),
        migrations.RunSQL(sql=TERMS_SQL, reverse_sql=TERMS_REVERSE),
        enable_workspace_rls("graph_entity_terms"),
    ]
