"""SQL for keys that carry `workspace_id`, used by the migrations: one schema for a single PostgreSQL and for
Citus, where every table holding workspace data is distributed by `workspace_id` (docs/operations.md,
"Citus").

Citus needs the distribution column in every primary key, unique constraint and foreign key of a distributed
table. On a single node these keys cost nothing extra: the primary key leads with `id`, so a lookup by `id`
alone still uses it, and a composite foreign key checks the same row a plain one did. Django keeps `id` as
the model's primary key; the database's key is `(id, workspace_id)`.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


def workspace_primary_key(table: str, *, column: str = "id") -> migrations.RunSQL:
    """The table's primary key becomes `(column, workspace_id)` under its usual name."""
    return migrations.RunSQL(
        sql=(
            f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, "
            f"ADD CONSTRAINT {table}_pkey PRIMARY KEY ({column}, workspace_id)"
        ),
        reverse_sql=(
            f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, "
            f"ADD CONSTRAINT {table}_pkey PRIMARY KEY ({column})"
        ),
    )


def workspace_foreign_key(
    table: str, column: str, *, references: str, name: str, on_delete: str = "NO ACTION"
) -> migrations.RunSQL:
    """A foreign key `(workspace_id, column) -> references (workspace_id, id)`: a row can only point at a
    row of its own workspace, and on Citus both live on the same shard."""
    return migrations.RunSQL(
        sql=(
            f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY (workspace_id, {column}) "
            f"REFERENCES {references} (workspace_id, id) ON DELETE {on_delete} DEFERRABLE INITIALLY DEFERRED"
        ),
        reverse_sql=f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}",
    )


# --- distribution on Citus ----------------------------------------------------------------------------------
# Tables every workspace table is colocated with: a workspace's rows of all of them live on one shard group.
COLOCATE_WITH = "memories"
# Write functions that take the workspace: Citus runs a call whole on that workspace's shard, inside the
# caller's transaction (force_delegation), as the caller and under row-level security.
DELEGATED_FUNCTIONS = {
    "graph_mapping_insert_fresh(bigint, uuid, text[], text[], text[], jsonb[], text[], text[], text[], "
    "text[], text[], text[], text[], text[], timestamptz)": "p_ws",
}

_WORKSPACE_TABLES_SQL = """
SELECT c.relname FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
WHERE c.relkind = 'r' AND c.relrowsecurity
  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'workspace_id'
              AND NOT a.attisdropped)
ORDER BY c.relname
"""


def workspace_tables(cursor: Any) -> list[str]:
    """The tables holding workspace data: row-level security on and a workspace_id column."""
    cursor.execute(_WORKSPACE_TABLES_SQL)
    return [row[0] for row in cursor.fetchall()]


def _citus(cursor: Any) -> bool:
    cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'")
    return cursor.fetchone() is not None


def _foreign_keys_between(cursor: Any, tables: list[str]) -> list[tuple[str, str, str]]:
    """(table, constraint, definition) of the foreign keys from one of `tables` to another."""
    cursor.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE contype = 'f' AND conrelid::regclass::text = ANY(%s) AND confrelid::regclass::text = ANY(%s) "
        "ORDER BY 1, 2",
        [tables, tables],
    )
    return [(row[0], row[1], row[2]) for row in cursor.fetchall()]


def _foreign_keys_touching(cursor: Any, table: str, *, exclude: list[str]) -> list[tuple[str, str, str]]:
    """The foreign keys from `table` to a table not in `exclude`, and to `table` from one not in `exclude`."""
    cursor.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE contype = 'f' AND ((conrelid = %s::regclass AND NOT confrelid::regclass::text = ANY(%s)) "
        "OR (confrelid = %s::regclass AND NOT conrelid::regclass::text = ANY(%s))) ORDER BY 1, 2",
        [table, exclude, table, exclude],
    )
    return [(row[0], row[1], row[2]) for row in cursor.fetchall()]


def distribute_workspace_tables(apps: Any, schema_editor: Any) -> None:
    """On a database with the citus extension: `workspaces` becomes a reference table (on every node), every
    workspace table is distributed by workspace_id and colocated with memories, the plpgsql and SQL functions
    the tables' triggers call are created on the workers, and the write functions that take the workspace are
    delegated by it. Tables already distributed are left alone, so a later migration can call this again for
    a new table. Nothing happens on a database without citus."""
    with schema_editor.connection.cursor() as cursor:
        if not _citus(cursor):
            return
        # Statements of this transaction touch many shards on one connection per node: one at a time, or a
        # later statement could not see what an earlier parallel one wrote.
        cursor.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        cursor.execute("SET LOCAL citus.enable_unsafe_triggers TO on")
        cursor.execute("SELECT logicalrelid::text FROM pg_dist_partition")
        done = {row[0] for row in cursor.fetchall()}
        tables = [t for t in workspace_tables(cursor) if t not in done]
        # Citus distributes a table only when no plain table references it, and turns every plain table linked
        # to a reference table by a foreign key into a "Citus local" table, which an integer identity column
        # (auth_user's) or a policy rules out. So the keys between workspace tables and to workspaces come off
        # for the move and go back on after, when both ends are shards or reference tables; the account
        # tables' keys to and from workspaces (users, memberships, keys, invitations) stay off: they live on
        # the coordinator only, and Django's on_delete keeps them consistent.
        foreign_keys = _foreign_keys_between(cursor, [*tables, "workspaces"])
        control_plane = _foreign_keys_touching(cursor, "workspaces", exclude=[*tables, "workspaces"])
        for table, name, _definition in [*foreign_keys, *control_plane]:
            cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        if "workspaces" not in done:
            cursor.execute("SELECT create_reference_table('workspaces')")
        # Functions first: a trigger that fires on a worker calls them there.
        cursor.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace AND n.nspname = 'public' "
            "JOIN pg_language l ON l.oid = p.prolang AND l.lanname IN ('plpgsql', 'sql') "
            "WHERE NOT EXISTS (SELECT 1 FROM pg_dist_object d WHERE d.classid = 'pg_proc'::regclass "
            "AND d.objid = p.oid)"
        )
        for (function,) in cursor.fetchall():
            if function.split("(")[0] not in {name.split("(")[0] for name in DELEGATED_FUNCTIONS}:
                cursor.execute("SELECT create_distributed_function(%s)", [function])
        # Copying existing rows into the shards would fire the tables' triggers there, against tables not yet
        # distributed (the postings they would write are copied with their own table anyway).
        for table in tables:
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        for table in sorted(tables, key=lambda t: t != COLOCATE_WITH):
            # FORCE row-level security would hide the rows from the owner copying them into the shards.
            cursor.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
            if table == COLOCATE_WITH:
                cursor.execute("SELECT create_distributed_table(%s, 'workspace_id')", [table])
            else:
                cursor.execute(
                    "SELECT create_distributed_table(%s, 'workspace_id', colocate_with => %s)",
                    [table, COLOCATE_WITH],
                )
            cursor.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        for table in tables:
            cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
        for table, name, definition in foreign_keys:
            cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
        for function, argument in DELEGATED_FUNCTIONS.items():
            cursor.execute(
                "SELECT create_distributed_function(%s, %s, colocate_with => %s, force_delegation => true)",
                [function, argument, COLOCATE_WITH],
            )


def undistribute_workspace_tables(apps: Any, schema_editor: Any) -> None:
    """The reverse: every distributed or reference table back to a plain table on the coordinator."""
    with schema_editor.connection.cursor() as cursor:
        if not _citus(cursor):
            return
        cursor.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        cursor.execute(
            "SELECT logicalrelid::text FROM pg_dist_partition WHERE partmethod = 'h' "
            "ORDER BY logicalrelid DESC"
        )
        for (table,) in cursor.fetchall():
            cursor.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
            cursor.execute("SELECT undistribute_table(%s, cascade_via_foreign_keys => true)", [table])
            cursor.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


def citus_installed_on(schema_editor: Any) -> bool:
    """Whether a migration runs against a database with the citus extension."""
    with schema_editor.connection.cursor() as cursor:
        return _citus(cursor)
