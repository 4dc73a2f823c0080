"""Foreign keys that the database itself follows: graph rows are deleted in raw SQL (orphan pruning, forget), and
Django's on_delete only acts on ORM deletes."""

from django.db import migrations

# (table, column, referenced table, action)
FOREIGN_KEYS = [
    ("graph_entity_aliases", "node_id", "graph_nodes", "CASCADE"),
    ("graph_nodes", "community_id", "graph_communities", "SET NULL"),
    ("graph_edges", "superseded_by_id", "graph_edges", "SET NULL"),
]


def _sql(action_for: dict[tuple[str, str], str]) -> list[str]:
    statements = []
    for (table, column), action in action_for.items():
        referenced = next(ref for t, c, ref, _ in FOREIGN_KEYS if (t, c) == (table, column))
        statements.append(f"""
            DO $$
            DECLARE name text;
            BEGIN
                SELECT con.conname INTO name FROM pg_constraint con
                JOIN pg_attribute att ON att.attrelid = con.conrelid AND att.attnum = ANY(con.conkey)
                WHERE con.conrelid = '{table}'::regclass AND con.contype = 'f' AND att.attname = '{column}';
                EXECUTE format('ALTER TABLE {table} DROP CONSTRAINT %I', name);
                EXECUTE format('ALTER TABLE {table} ADD CONSTRAINT %I FOREIGN KEY ({column}) REFERENCES {referenced}(id)
                                ON DELETE {action} DEFERRABLE INITIALLY DEFERRED', name);
            END $$;
        """)
    return statements


class Migration(migrations.Migration):
    dependencies = [("graphsvc", "0005_entity_search_and_rls")]

    operations = [
        migrations.RunSQL(
            sql=_sql({(t, c): action for t, c, _, action in FOREIGN_KEYS}),
            reverse_sql=_sql({(t, c): "NO ACTION" for t, c, _, _ in FOREIGN_KEYS}),
        )
    ]
