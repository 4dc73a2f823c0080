"""Community membership moves out of graph_nodes into graph_community_members.

A community run from no communities set community_id on every entity: one UPDATE of 100k wide graph_nodes rows,
none of them HOT (the column was indexed), each adding entries to all five indexes of graph_nodes including two
GIN ones (186 MB of WAL) and queueing a deferred foreign-key check — 4.7 s of a 6.5 s run at 1M facts. The
membership is now a row of three integers in a table of its own, written with one INSERT ... SELECT from arrays.

The table has no foreign-key constraints: one RI check per inserted row (a lookup and a row lock on the entity
and on the community) is what made the old write slow at commit. Statement-level AFTER DELETE triggers on
graph_nodes and graph_communities delete the memberships of deleted rows instead, one set-based DELETE per
statement, for the raw-SQL deletes as well as the ORM's. They run in the deleting transaction's workspace
context, which is the only one whose rows that statement could delete.

The old column is dropped after its values are copied (dropping a column only changes the catalog; no code
reads it any more).
"""

import django.db.models.deletion
from django.db import migrations, models

from tenancy.rls_sql import enable_workspace_rls, for_each_workspace_sql

TRIGGERS_SQL = [
    """
    CREATE FUNCTION graph_community_members_node_gone() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM graph_community_members m USING gone g WHERE m.workspace_id = g.workspace_id AND m.node_id = g.id;
        RETURN NULL;
    END $$
    """,
    "CREATE TRIGGER graph_nodes_members_gone AFTER DELETE ON graph_nodes REFERENCING OLD TABLE AS gone "
    "FOR EACH STATEMENT EXECUTE FUNCTION graph_community_members_node_gone()",
    """
    CREATE FUNCTION graph_community_members_community_gone() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM graph_community_members m USING gone g
            WHERE m.workspace_id = g.workspace_id AND m.community_id = g.id;
        RETURN NULL;
    END $$
    """,
    "CREATE TRIGGER graph_communities_members_gone AFTER DELETE ON graph_communities REFERENCING OLD TABLE AS gone "
    "FOR EACH STATEMENT EXECUTE FUNCTION graph_community_members_community_gone()",
]

TRIGGERS_REVERSE = [
    "DROP TRIGGER IF EXISTS graph_communities_members_gone ON graph_communities",
    "DROP FUNCTION IF EXISTS graph_community_members_community_gone()",
    "DROP TRIGGER IF EXISTS graph_nodes_members_gone ON graph_nodes",
    "DROP FUNCTION IF EXISTS graph_community_members_node_gone()",
]

COPY_SQL = for_each_workspace_sql(
    """INSERT INTO graph_community_members (workspace_id, node_id, community_id)
            SELECT n.workspace_id, n.id, n.community_id FROM graph_nodes n
            JOIN graph_communities c ON c.id = n.community_id AND c.workspace_id = n.workspace_id
            WHERE n.workspace_id = ws AND n.community_id IS NOT NULL"""
)

COPY_BACK_SQL = for_each_workspace_sql(
    """UPDATE graph_nodes n SET community_id = m.community_id FROM graph_community_members m
            WHERE m.workspace_id = ws AND n.workspace_id = ws AND n.id = m.node_id"""
)

# Going back re-adds the column as 0006 left it: ON DELETE SET NULL (dissolving a community clears its members'
# column), which the code before this migration relies on, under the name Django gave the constraint.
DROP_COLUMN = ["DROP INDEX IF EXISTS graph_nodes_community", "ALTER TABLE graph_nodes DROP COLUMN community_id"]
ADD_COLUMN_BACK = [
    "ALTER TABLE graph_nodes ADD COLUMN community_id bigint NULL "
    "CONSTRAINT graph_nodes_community_id_890f9b8d_fk_graph_communities_id REFERENCES graph_communities(id) "
    "ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED",
    "CREATE INDEX graph_nodes_community ON graph_nodes (workspace_id, community_id) WHERE community_id IS NOT NULL",
]


class Migration(migrations.Migration):
    dependencies = [
        ("graphsvc", "0010_recall_covering_indexes"),
        ("tenancy", "0002_extensions_and_rate_limits"),
    ]

    operations = [
        migrations.CreateModel(
            name="GraphCommunityMember",
            fields=[
                ("pk", models.CompositePrimaryKey("workspace", "node", blank=True, editable=False, primary_key=True,
                                                  serialize=False)),
                ("community", models.ForeignKey(db_constraint=False, db_index=False,
                                                on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                                to="graphsvc.graphcommunity")),
                ("node", models.ForeignKey(db_constraint=False, db_index=False,
                                           on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                           to="graphsvc.graphnode")),
                ("workspace", models.ForeignKey(db_constraint=False, db_index=False,
                                                on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                                to="tenancy.workspace")),
            ],
            options={
                "db_table": "graph_community_members",
                "indexes": [models.Index(fields=["community"], name="graph_community_members_cid")],
            },
        ),
        enable_workspace_rls("graph_community_members"),
        migrations.RunSQL(sql=TRIGGERS_SQL, reverse_sql=TRIGGERS_REVERSE),
        migrations.RunSQL(sql=COPY_SQL, reverse_sql=COPY_BACK_SQL),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="graphnode", name="graph_nodes_community"),
                migrations.RemoveField(model_name="graphnode", name="community"),
            ],
            database_operations=[migrations.RunSQL(sql=DROP_COLUMN, reverse_sql=ADD_COLUMN_BACK)],
        ),
    ]
